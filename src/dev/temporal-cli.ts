import { spawn } from 'node:child_process';
import { loadLauncherConfig } from '../config/service-config.js';
import { readDevState } from '../process/dev-state.js';
import { loadOrExit } from '../process/lifecycle.js';
import { temporalCliPath } from './temporal-binaries.js';

/**
 * `npm run temporal -- <arguments>`: the Temporal CLI that `npm start` runs its dev server with
 * (on PATH, TEMPORAL_CLI_PATH, or fetched once into .tools/), so `temporal workflow list …` works
 * without installing it. Pointed at the running `npm start`'s server unless TEMPORAL_ADDRESS (or
 * `--address`) says otherwise.
 */
const env: NodeJS.ProcessEnv = { ...process.env };
if (!env.TEMPORAL_ADDRESS) {
  const state = readDevState(loadOrExit(() => loadLauncherConfig()).DATA_DIR);
  if (state) env.TEMPORAL_ADDRESS = state.temporalAddress;
}
const child = spawn(await temporalCliPath(), process.argv.slice(2), { stdio: 'inherit', env });
// Ctrl-C reaches the CLI too (same terminal); this process waits for its exit status.
process.on('SIGINT', () => undefined);
child.once('exit', (code, signal) => {
  process.exitCode = code ?? (signal ? 1 : 0);
});
