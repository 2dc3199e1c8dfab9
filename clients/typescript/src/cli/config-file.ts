import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, realpath, rename, rm } from 'node:fs/promises';
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

/**
 * Writes the config file so that the key is never in a file others can read: a new file, created
 * 0600 before a byte is written, then renamed over the old one. Writing into an existing 0644 file
 * and then tightening its mode left the key readable meanwhile, and readable for good through any
 * descriptor opened on it before. A symlinked config file (dotfiles) is followed, not replaced.
 */
export async function writeConfig(
  config: StoredConfig,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const file = configPath(env);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const target = await realpath(file).catch(() => file);
  const temporary = path.join(path.dirname(target), `.config.json.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temporary, 'wx', 0o600);
  try {
    await handle.chmod(0o600); // whatever the umask left
    await handle.writeFile(JSON.stringify(config, null, 2) + '\n');
    await handle.sync();
    await handle.close();
    await rename(temporary, target);
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(temporary, { force: true });
    throw error;
  }
  return file;
}

/**
 * The API key, from the first source that has one: --api-key, then the environment
 * (GENERATION_API_KEY), then the config file. The flag wins, as in every peer CLI: it is the most
 * specific thing the user said.
 */
export function chooseApiKey(
  env: NodeJS.ProcessEnv,
  flag: string | undefined,
  stored: StoredConfig,
): string | undefined {
  return flag || env.GENERATION_API_KEY || stored.api_key || undefined;
}

/** The base URL in the same order: --base-url, GENERATION_BASE_URL, the config file (else the client's default). */
export function chooseBaseURL(
  env: NodeJS.ProcessEnv,
  flag: string | undefined,
  stored: StoredConfig,
): string | undefined {
  return flag || env.GENERATION_BASE_URL || stored.base_url || undefined;
}
