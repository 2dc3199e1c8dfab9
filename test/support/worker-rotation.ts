import type { ChildProcess } from 'node:child_process';
import { crash, type WorkerProcesses } from './worker-process.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Worker processes for a fault run: `start` one more; `killUntil` SIGKILLs the oldest every
 * ~`everyMs` (0.7–1.3 of it, by `next`) and starts its replacement, until `until`; `replaceOldest`
 * does it once, now; `refill` brings them back to `count` once the faults stop.
 */
export function workerRotation(workers: WorkerProcesses) {
  const running: ChildProcess[] = [];
  const start = async () => {
    running.push(await workers.start());
  };
  const killOldest = async () => {
    const dying = running.shift();
    if (dying) await crash(dying);
  };
  return {
    start,
    killUntil: async (until: number, everyMs: number, next: () => number) => {
      while (Date.now() < until) {
        await sleep(everyMs * (0.7 + 0.6 * next()));
        await killOldest();
        await start();
      }
    },
    replaceOldest: async () => {
      await killOldest();
      await start();
    },
    refill: async (count: number) => {
      while (running.length < count) await start();
    },
  };
}
