import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { projectRoot } from '../../src/config/project-root.js';
import type {
  ProviderChildName,
  ProviderChildOptions,
  ProviderChildRequest,
  ProviderReport,
} from './providers/provider-child.js';

export type { ProviderChildName, ProviderReport } from './providers/provider-child.js';

/** A fake provider (fal, Replicate, OpenAI) running in a child process of its own, behind a cutting relay. */
export interface ProviderProcess {
  name: ProviderChildName;
  /** The variables the API and the worker read (FAL_QUEUE_URL …), pointed at the relay. */
  env: Record<string, string>;
  /** SIGSTOP: the provider stops answering; connections are still accepted by the kernel. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** The relay resets no more connections. */
  calm(): Promise<void>;
  /** What the provider received and holds (asked over IPC: resumes the process first). */
  report(): Promise<ProviderReport>;
  close(): Promise<void>;
}

const childEntry = path.join(path.dirname(fileURLToPath(import.meta.url)), 'providers', 'provider-child.ts');

export async function startProviderProcess(
  name: ProviderChildName,
  options: ProviderChildOptions,
): Promise<ProviderProcess> {
  const tsx = pathToFileURL(createRequire(path.join(projectRoot, 'package.json')).resolve('tsx')).href;
  const child: ChildProcess = spawn(process.execPath, ['--import', tsx, childEntry, name], {
    cwd: projectRoot,
    env: {
      ...process.env,
      TSX_TSCONFIG_PATH: path.join(projectRoot, 'tsconfig.json'),
      PROVIDER_CHILD_OPTIONS: JSON.stringify(options),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const env = await new Promise<Record<string, string>>((resolve, reject) => {
    child.once('message', (message: { env: Record<string, string> }) => resolve(message.env));
    child.once('exit', (code) => reject(new Error(`provider child ${name} exited ${code}`)));
  });
  let paused = false;
  let nextId = 0;
  const ask = <T>(type: ProviderChildRequest['type']) =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      const answer = (message: { id: number } & T) => {
        if (message.id !== id) return;
        child.off('message', answer);
        resolve(message);
      };
      child.on('message', answer);
      child.send({ id, type } satisfies ProviderChildRequest);
    });
  const signal = (which: 'SIGSTOP' | 'SIGCONT') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(which);
  };
  const resume = () => {
    paused = false;
    signal('SIGCONT');
  };
  return {
    name,
    env,
    pause() {
      paused = true;
      signal('SIGSTOP');
    },
    resume,
    calm: async () => {
      if (paused) resume();
      await ask('calm');
    },
    report: async () => {
      if (paused) resume();
      return (await ask<{ report: ProviderReport }>('report')).report;
    },
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      // A stopped process still dies of SIGKILL.
      child.kill('SIGKILL');
      await exited;
    },
  };
}
