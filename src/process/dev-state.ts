import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

/** What a running `npm start` tells other local commands (the admin CLI, benchmarks). */
interface DevState {
  pid: number;
  databaseUrl: string;
  temporalAddress: string;
  apiUrl: string;
  /** The account console's base URL (sign-in links are made with it). */
  consoleUrl?: string;
  temporalUiUrl: string | null;
}

/** The file in `npm start`'s data folder (DATA_DIR) that holds its DevState while it runs. */
const stateFile = (dataDir: string) => path.join(dataDir, 'dev-state.json');

export async function writeDevState(dataDir: string, state: DevState): Promise<void> {
  await writeFile(stateFile(dataDir), `${JSON.stringify(state, null, 2)}\n`);
}

/** The state of the development service running from `dataDir`, or null when none runs. */
export function readDevState(dataDir: string): DevState | null {
  try {
    const state = JSON.parse(readFileSync(stateFile(dataDir), 'utf8')) as DevState;
    process.kill(state.pid, 0);
    return state;
  } catch {
    return null;
  }
}
