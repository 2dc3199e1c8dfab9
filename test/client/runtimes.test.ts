import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';
import { nodeReleaseExecutable } from '../support/node-release.js';
import { ensureClientBuilt, useListeningStack } from './client-stack.js';

const smoke = path.join(projectRoot, 'test/client/runtimes/smoke.mjs');
const bin = (name: string) => path.join(projectRoot, 'node_modules/.bin', name);

/**
 * Bun's executable. The `bun` package's own bin is a placeholder until its postinstall moves the
 * binary there; when npm skips install scripts, the binary is still in the platform package
 * (@oven/bun-<os>-<arch>[-variant]/bin/bun).
 */
function bunExecutable(): string {
  const oven = path.join(projectRoot, 'node_modules/@oven');
  const platform = existsSync(oven)
    ? readdirSync(oven)
        .filter((d) => d.startsWith(`bun-${process.platform}-${process.arch}`))
        .map((d) => path.join(oven, d, 'bin', 'bun'))
        .find((file) => existsSync(file))
    : undefined;
  return platform ?? path.join(projectRoot, 'node_modules/bun/bin/bun.exe');
}

/**
 * Node 20 and 22 (the suite runs on 24, from the `node` dev dependency), fetched once from the npm
 * registry, and the machine's own Node when it is yet another version.
 */
const otherReleases = await Promise.all(['20.20.2', '22.23.3'].map((v) => nodeReleaseExecutable(v)));
function otherNodes(): Array<{ name: string; command: string; args: string[] }> {
  const found = new Map<string, string>();
  for (const candidate of [...otherReleases, '/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(candidate)) continue;
    const version = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
    if (version !== process.version && !found.has(version)) found.set(version, candidate);
  }
  return [...found].map(([version, command]) => ({
    name: `node ${version} (${command})`,
    command,
    args: [smoke],
  }));
}

/**
 * The runtimes the core is checked on: this Node, and Bun and Deno from their npm packages
 * (devDependencies of the client; both run whether or not npm ran their install scripts: Deno's bin
 * is a launcher script, Bun's binary is taken from its platform package). CLIENT_TEST_NODES adds other
 * Node binaries (comma-separated paths), e.g. Node 22 and 24.
 */
const runtimes: Array<{ name: string; command: string; args: string[] }> = [
  { name: `node ${process.version}`, command: process.execPath, args: [smoke] },
  { name: 'bun', command: bunExecutable(), args: ['run', smoke] },
  {
    name: 'deno',
    command: bin('deno'),
    args: ['run', '--allow-net=127.0.0.1', '--allow-env', '--allow-read', smoke],
  },
  ...otherNodes(),
  ...(process.env.CLIENT_TEST_NODES ?? '')
    .split(',')
    .filter(Boolean)
    .map((node) => ({ name: node, command: node, args: [smoke] })),
];

describe('the core runs the same on each runtime (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 1000 }, worker: { simDelayMs: 100 } });
  beforeAll(async () => {
    await ensureClientBuilt();
  }, 180_000);

  it.each(runtimes)(
    '$name: models, create, wait, replay by key, a 400 as InvalidRequestError, list',
    async ({ command, args }) => {
      const { stdout } = await promisify(execFile)(command, args, {
        cwd: projectRoot,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          DENO_NO_UPDATE_CHECK: '1',
          GENERATION_API_KEY: stack.account.key,
          GENERATION_BASE_URL: stack.listening.baseURL,
        },
        timeout: 60_000,
      });
      expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({
        models: 5,
        status: 'succeeded',
        keyIsUuid: true,
        replaySameId: true,
        invalid: { isInvalidRequest: true, code: 'invalid_request', issues: 1 },
        listed: 1,
      });
    },
  );
});
