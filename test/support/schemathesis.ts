import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { schemathesisPython } from '../../src/dev/schemathesis.js';

export interface SchemathesisRun {
  /** The CLI's exit code; null when it was stopped at the time limit. */
  exitCode: number | null;
  timedOut: boolean;
  seconds: number;
  /** Everything the CLI printed (stdout and stderr, in order). */
  output: string;
  /** From its JSON report. */
  cases: number;
  failures: Array<{ code: string; title: string; count: number; operations: string[] }>;
  errors: Array<{ title: string; count: number }>;
  operationsTested: number;
  operationsTotal: number;
}

export interface SchemathesisOptions {
  /** A schemathesis.toml. */
  configFile: string;
  schemaUrl: string;
  /** More `st run` options (after the schema location). */
  args: string[];
  /** Stopped with SIGKILL past this. */
  timeLimitMs: number;
  /** Where to keep its reports (JSON, NDJSON with every request and response, JUnit); by default none are kept. */
  reportDir?: string;
}

/**
 * Runs `st --config-file <configFile> run <schemaUrl> <args>`, the pinned
 * schemathesis (fetched on first use), and reads its JSON report.
 */
export async function runSchemathesis(options: SchemathesisOptions): Promise<SchemathesisRun> {
  const python = await schemathesisPython();
  // Its own working folder: schemathesis and Hypothesis may write caches there.
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'schemathesis-'));
  const reportDir = options.reportDir ?? scratch;
  await mkdir(reportDir, { recursive: true });
  const reportPath = path.join(reportDir, 'report.json');
  const reports = options.reportDir ? 'json,ndjson,junit' : 'json';
  const started = Date.now();
  try {
    const { exitCode, timedOut, output } = await new Promise<{
      exitCode: number | null;
      timedOut: boolean;
      output: string;
    }>((resolve, reject) => {
      const child = spawn(
        python,
        [
          '-m',
          'schemathesis.cli',
          '--config-file',
          options.configFile,
          'run',
          options.schemaUrl,
          ...options.args,
          '--no-color',
          '--report',
          reports,
          '--report-dir',
          reportDir,
          '--report-json-path',
          reportPath,
        ],
        {
          cwd: scratch,
          // Wide lines: a reproducing curl command stays on one line.
          env: { ...process.env, COLUMNS: '240', PYTHONIOENCODING: 'utf-8', NO_COLOR: '1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      const chunks: Buffer[] = [];
      child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, options.timeLimitMs);
      child.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ exitCode: code, timedOut, output: Buffer.concat(chunks).toString('utf8') });
      });
    });
    const report = JSON.parse(await readFile(reportPath, 'utf8').catch(() => '{}')) as {
      test_cases?: { generated?: number };
      failures?: SchemathesisRun['failures'];
      errors?: SchemathesisRun['errors'];
      operations?: { tested?: number; total?: number };
    };
    return {
      exitCode,
      timedOut,
      seconds: (Date.now() - started) / 1000,
      output,
      cases: report.test_cases?.generated ?? 0,
      failures: report.failures ?? [],
      errors: report.errors ?? [],
      operationsTested: report.operations?.tested ?? 0,
      operationsTotal: report.operations?.total ?? 0,
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
