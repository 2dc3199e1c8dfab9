import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { startApiProcess, type ApiProcess } from '../support/api-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

/** The scenarios that do not apply to this server, each with why: conformance-not-applicable.yml. */
const baseline = path.join(import.meta.dirname, 'conformance-not-applicable.yml');

/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, server mode) against
 * /v1/mcp of the real API process. The suite's client sends no credentials, and /v1/mcp, like every
 * API route, wants an API key: it is pointed at a relay on loopback that adds `Authorization:
 * Bearer <key>` of a test account to each request and passes everything else through as it came
 * (Host and Origin included, so the DNS-rebinding scenario's hostile Origin reaches the API). The
 * relay stands for an MCP client configured with a key header, as docs/mcp.md sets them up.
 *
 * The suite's own baseline mechanism (--expected-failures) lists the scenarios that need tools,
 * prompts or resources this server does not have: the run fails if one of them unexpectedly
 * passes, or if any other scenario fails.
 */
describe('MCP conformance suite (server mode)', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiProcess;
  let account: TestAccount;
  let relay: http.Server;
  let relayUrl: string;
  let outputDir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool);
    api = await startApiProcess({ ...worker.apiEnv, DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: '100000' });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    const upstream = new URL(api.origin);
    relay = http.createServer((request, response) => {
      const forwarded = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: request.method,
          path: request.url,
          headers: { ...request.headers, authorization: `Bearer ${account.key}` },
        },
        (answer) => {
          response.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(response);
        },
      );
      forwarded.on('error', () => response.destroy());
      request.pipe(forwarded);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}/v1/mcp`;
    outputDir = await mkdtemp(path.join(os.tmpdir(), 'mcp-conformance-'));
  });
  afterAll(async () => {
    await new Promise((resolve) => relay?.close(resolve));
    await api?.stop();
    await worker?.close();
    await db?.drop();
    if (outputDir) await rm(outputDir, { recursive: true, force: true });
  });

  it('passes every scenario that applies to a server of tools', async () => {
    const cli = path.join('node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
    const run = spawn(
      process.execPath,
      [cli, 'server', '--url', relayUrl, '--expected-failures', baseline, '-o', outputDir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    run.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    run.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => run.once('close', resolve));

    const results = await scenarioResults(outputDir);
    const failed = Object.entries(results).filter(([, r]) => r.failures.length > 0);
    const passed = Object.keys(results).filter((name) => results[name]!.failures.length === 0);
    console.info(`conformance: passed ${passed.sort().join(', ')}`);
    for (const [name, r] of Object.entries(results))
      if (r.warnings.length > 0) console.info(`conformance: ${name} warns: ${r.warnings.join('; ')}`);
    expect(code, output.slice(-3000)).toBe(0);
    const notApplicable = (await readFile(baseline, 'utf8'))
      .match(/^ {2}- ([\w-]+)/gm)!
      .map((l) => l.slice(4));
    // Each scenario that failed is one listed as not applicable, and each listed one that ran failed
    // (the suite's pending scenarios do not run by default).
    expect(failed.map(([name]) => name).sort()).toEqual(notApplicable.filter((n) => n in results).sort());
    for (const name of [
      'server-initialize',
      'ping',
      'tools-list',
      'dns-rebinding-protection',
      'server-sse-multiple-streams',
    ])
      expect(passed, name).toContain(name);
  });

  it('server-sse-polling (pending in this release of the suite): no failure, and why it warns', async () => {
    const dir = path.join(outputDir, 'polling');
    const code = await runSuite(['--scenario', 'server-sse-polling', '-o', dir]);
    const { 'server-sse-polling': polling } = await scenarioResults(dir);
    // It calls the suite's own tool test_reconnection, which this server has not (a protocol
    // error), and looks for a priming event and a retry field: resumable streams, which a
    // stateless server without an event store does not offer (warnings, not failures).
    expect(polling!.failures).toEqual([]);
    expect(polling!.warnings.map((w) => w.split(':')[0]).sort()).toEqual([
      'server-sse-priming-event',
      'server-sse-retry-field',
    ]);
    expect(code).toBe(0);
  });

  function runSuite(args: string[]): Promise<number | null> {
    const cli = path.join('node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
    const run = spawn(process.execPath, [cli, 'server', '--url', relayUrl, ...args], { stdio: 'ignore' });
    return new Promise((resolve) => run.once('close', resolve));
  }
});

/** Each scenario's checks (checks.json in a folder per scenario), as failures and warnings. */
async function scenarioResults(
  dir: string,
): Promise<Record<string, { failures: string[]; warnings: string[] }>> {
  const results: Record<string, { failures: string[]; warnings: string[] }> = {};
  for (const folder of await readdir(dir)) {
    const name = /^server-(.+)-\d{4}-\d\d-\d\dT/.exec(folder)?.[1] ?? folder;
    const checks = JSON.parse(await readFile(path.join(dir, folder, 'checks.json'), 'utf8')) as Array<{
      id: string;
      status: string;
      errorMessage?: string;
    }>;
    const said = (status: string) =>
      checks.filter((c) => c.status === status).map((c) => `${c.id}: ${c.errorMessage ?? ''}`);
    results[name] = { failures: said('FAILURE'), warnings: said('WARNING') };
  }
  return results;
}
