import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** What `gen login` keeps: mode 0600, under the XDG config folder. */
export interface StoredConfig {
  api_key?: string;
  base_url?: string;
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'gen', 'config.json');
}

export async function readConfig(env: NodeJS.ProcessEnv = process.env): Promise<StoredConfig> {
  try {
    return JSON.parse(await readFile(configPath(env), 'utf8')) as StoredConfig;
  } catch {
    return {};
  }
}

export async function writeConfig(
  config: StoredConfig,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const file = configPath(env);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // Created with 0600 and set again: an older file keeps its mode on overwrite.
  await writeFile(file, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 });
  await chmod(file, 0o600);
  return file;
}

/**
 * The API key, from the first source that has one, in the documented order: the environment
 * (GENERATION_API_KEY), then --api-key, then the config file.
 */
export function chooseApiKey(
  env: NodeJS.ProcessEnv,
  flag: string | undefined,
  stored: StoredConfig,
): string | undefined {
  return env.GENERATION_API_KEY || flag || stored.api_key || undefined;
}
