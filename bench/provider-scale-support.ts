import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseCatalogFile } from '../src/catalog/catalog-file.js';
import { importCatalog } from '../src/catalog/catalog-import.js';
import type { DatabasePool } from '../src/db/pool.js';
import { projectRoot } from '../src/config/project-root.js';
import type { Scrape } from '../test/support/prometheus.js';
import type { StandInName, StandInOptions, StandInReport } from './provider-scale-child.js';
import type { Stack } from './stack.js';

/** A provider stand-in in a process of its own (provider-scale-child.ts). */
export interface StandIn {
  name: StandInName;
  pid: number;
  /** The variables the API and worker read (REPLICATE_API_URL, FAL_QUEUE_URL, FAL_JWKS_URL …). */
  env: Record<string, string>;
  report(): Promise<StandInReport>;
  close(): Promise<void>;
}

export async function startStandIn(name: StandInName, options: StandInOptions): Promise<StandIn> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(projectRoot, 'bench', 'provider-scale-child.ts'), name],
    {
      cwd: projectRoot,
      env: { ...process.env, PROVIDER_SCALE_CHILD: JSON.stringify(options) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  const env = await new Promise<Record<string, string>>((resolve, reject) => {
    child.once('message', (message: { env: Record<string, string> }) => resolve(message.env));
    child.once('exit', (code) => reject(new Error(`stand-in ${name} exited ${code}`)));
  });
  let nextId = 0;
  return {
    name,
    pid: child.pid!,
    env,
    report: () =>
      new Promise<StandInReport>((resolve) => {
        const id = nextId++;
        const answer = (message: { id: number; report: StandInReport }) => {
          if (message.id !== id) return;
          child.off('message', answer);
          resolve(message.report);
        };
        child.on('message', answer);
        child.send({ id, type: 'report' });
      }),
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The bench's model of each provider: the example catalog's FLUX [schnell] there. */
export const benchModels: Record<StandInName, { file: string; id: string }> = {
  replicate: { file: 'catalog/examples/replicate.json', id: 'replicate-flux-schnell' },
  fal: { file: 'catalog/examples/fal.json', id: 'fal-flux-schnell' },
};

/**
 * Imports the example catalog's model of each provider, alone and with `expected_run_seconds` set
 * to the jobs' duration (so a push-on wait's first fallback read comes after it), as an operator's
 * import-catalog would; the API hears of it by NOTIFY.
 */
export async function offerBenchModels(
  pool: DatabasePool,
  providers: readonly StandInName[],
  runSeconds: number,
): Promise<void> {
  for (const provider of providers) {
    const { file, id } = benchModels[provider];
    const models = parseCatalogFile(await readFile(path.join(projectRoot, file), 'utf8'), file)
      .filter((model) => model.id === id)
      .map((model) => ({ ...model, definition: { ...model.definition, expected_run_seconds: runSeconds } }));
    await importCatalog(pool, `${file} (bench: ${id})`, models);
  }
}

/** Sum of a metric's series whose labels include `labels`. */
export function total(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  return scrape.samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/**
 * Activity slots in use, from the worker's Temporal SDK metrics: local activities (a provider's
 * status read), activities on the provider waits' queue (a synchronous provider's call), and
 * activities on every queue.
 */
export function activitySlots(scrape: Scrape): { reads: number; waits: number; activities: number } {
  const used = 'temporal_worker_task_slots_used';
  return {
    reads: total(scrape, used, { worker_type: 'LocalActivityWorker' }),
    waits: scrape.samples
      .filter((s) => s.name === used && s.labels.worker_type === 'ActivityWorker')
      .filter((s) => s.labels.task_queue?.endsWith('.provider-waits'))
      .reduce((n, s) => n + s.value, 0),
    activities: total(scrape, used, { worker_type: 'ActivityWorker' }),
  };
}

/** The most jobs running at once at the stand-in, from their creates (end less run time) and ends. */
export function peakRunning(endsAt: readonly number[], runMs: number): number {
  const edges = endsAt.flatMap((end) => [
    [end - runMs, 1],
    [end, -1],
  ]);
  edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let running = 0;
  let peak = 0;
  for (const [, step] of edges) peak = Math.max(peak, (running += step!));
  return peak;
}

/** Waits until the API offers the bench's models (it hears of the import by NOTIFY). */
export async function waitForModels(stack: Stack, names: readonly StandInName[]): Promise<void> {
  const wanted = names.map((name) => benchModels[name].id);
  for (let i = 0; ; i++) {
    const answer = await fetch(`${stack.apiUrl}/models`, {
      headers: { authorization: `Bearer ${stack.key}` },
    });
    const offered = ((await answer.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
    if (wanted.every((id) => offered.includes(id))) return;
    if (i > 100) throw new Error(`the API does not offer ${wanted.join(', ')}: ${offered.join(', ')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** POST one generation; a 503 or 429 (a loaded machine) is retried with the same key. Its id. */
export async function post(stack: Stack, model: string, key: string): Promise<string> {
  for (;;) {
    const response = await fetch(`${stack.apiUrl}/generations`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack.key}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      },
      body: JSON.stringify({ model, prompt: `provider scale ${key}` }),
    });
    if (response.status === 202) return ((await response.json()) as { id: string }).id;
    if (response.status !== 503 && response.status !== 429)
      throw new Error(`POST: ${response.status} ${await response.text()}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
