import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { projectRoot } from './temporal-binaries.js';

/** Where `npm start` keeps embedded servers' data; git-ignored. DATA_DIR moves it. */
export const dataDir = path.resolve(process.env.DATA_DIR ?? path.join(projectRoot, '.data'));
const stateFile = path.join(dataDir, 'dev-state.json');

/** What a running `npm start` tells other local commands (the admin CLI, benchmarks). */
export interface DevState {
  pid: number;
  databaseUrl: string;
  temporalAddress: string;
  apiUrl: string;
  temporalUiUrl: string | null;
}

export async function writeDevState(state: DevState): Promise<void> {
  await writeFile(stateFile, `${JSON.stringify(state, null, 2)}\n`);
}

/** The running development service's state, or null when none runs. */
export function readDevState(): DevState | null {
  try {
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as DevState;
    process.kill(state.pid, 0);
    return state;
  } catch {
    return null;
  }
}
