#!/usr/bin/env node
// The `gen` command: runs the built CLI (npm run build -w @generation-service/client builds it).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/esm/cli/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    'gen: the client is not built yet: run `npm run build -w @generation-service/client`.\n',
  );
  process.exit(1);
}
const { main } = await import(entry.href);
const code = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  cwd: process.cwd(),
});
// Let stdout drain (a pipe) before the exit code is set.
process.exitCode = code;
