import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import {
  AbortedError,
  Client,
  GenerationFailedError,
  InsufficientCreditsError,
  NotFoundError,
  RouteNotAvailableError,
  WaitTimeoutError,
  priceOf,
  type Generation,
} from '../../clients/typescript/src/index.js';
import { downloadAll, DownloadError } from '../../clients/typescript/src/node/index.js';
import { projectRoot } from '../../src/config/project-root.js';
import { createPaidAccount } from '../support/api.js';
import { startFaultyFront } from '../support/faulty-front.js';
import { useListeningStack } from './client-stack.js';

/** Whether the API on this checkout has a route (the issue-20 additions are being built beside this client). */
const routeSources = readdirSync(path.join(projectRoot, 'src/api/routes'))
  .map((f) => readFileSync(path.join(projectRoot, 'src/api/routes', f), 'utf8'))
  .join('\n');
const hasCancel = routeSources.includes('/cancel');
const hasQuote = routeSources.includes('/quote');
const hasPreferWait = readdirSync(path.join(projectRoot, 'src/api'), { recursive: true })
  .filter((f) => String(f).endsWith('.ts'))
  .some((f) =>
    readFileSync(path.join(projectRoot, 'src/api', String(f)), 'utf8').includes('preference-applied'),
  );
const hasKeyFilter = readFileSync(path.join(projectRoot, 'src/generations/list-query.ts'), 'utf8').includes(
  'idempotency_key',
);

describe('waiting, listing and reading with the client (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 1000 }, worker: { simDelayMs: 300 } });
  const client = () => new Client({ apiKey: stack.account.key, baseURL: stack.listening.baseURL });

  it('run(): the whole succeeded generation; downloadAll writes it once and never overwrites', async () => {
    const updates: Generation[] = [];
    const done = await client().generations.run(
      { model: 'lumen-pro', prompt: 'a red kite', aspect_ratio: '16:9' },
      { onUpdate: (g) => updates.push(g) },
    );
    expect(done).toMatchObject({ status: 'succeeded', model: 'lumen-pro', credits: 4 });
    expect(updates[0]!.status).toBe('queued');
    expect(updates.at(-1)!.status).toBe('succeeded');
    expect(JSON.parse(JSON.stringify(done))).not.toHaveProperty('idempotencyKey'); // the JSON is the API's

    const dir = await mkdtemp(path.join(os.tmpdir(), 'client-download-'));
    try {
      const saved = await downloadAll(done, dir);
      expect(saved).toHaveLength(1);
      expect(saved[0]).toMatchObject({ width: 1024, height: 576 });
      expect((await stat(saved[0]!.path)).size).toBe(saved[0]!.size);
      expect(await sharp(saved[0]!.path).metadata()).toMatchObject({ width: 1024, height: 576 });
      await expect(downloadAll(done, dir)).rejects.toBeInstanceOf(DownloadError);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a failed generation: GenerationFailedError with the code, the refund and the id', async () => {
    const error = await client()
      .generations.run({ model: 'lumen-lite', prompt: 'this one breaks [sim:fail]' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GenerationFailedError);
    expect(error).toMatchObject({ code: 'generation_failed', creditsRefunded: true, credits: 2 });
    expect((error as GenerationFailedError).generationId).toMatch(/^gen_/);
    expect((error as GenerationFailedError).idempotencyKey).toBeDefined();
  });

  it('a wait that times out leaves the job running; wait(id) resumes it from just the id', async () => {
    const created = await client().generations.create({ model: 'lumen-lite', prompt: 'slowly [sim:slow=3]' });
    const started = Date.now();
    const error = await client()
      .generations.wait(created.id, { timeoutMs: 800 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect((error as WaitTimeoutError).generationId).toBe(created.id);
    expect(Date.now() - started).toBeLessThan(3000);
    const done = await client().generations.wait(created.id, { timeoutMs: 30_000 });
    expect(done.status).toBe('succeeded');
  });

  it('aborting stops the waiting at once, with the id; the generation goes on', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const error = await client()
      .generations.run(
        { model: 'lumen-lite', prompt: 'left alone [sim:slow=2]' },
        { signal: controller.signal, onUpdate: () => setTimeout(() => controller.abort(), 100) },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AbortedError);
    expect(Date.now() - started).toBeLessThan(1500);
    const id = (error as AbortedError).generationId!;
    expect(id).toMatch(/^gen_/);
    expect((await client().generations.wait(id, { timeoutMs: 30_000 })).status).toBe('succeeded');
  });

  it('wait() asks the server to hold (Prefer: wait); an API that does not polls every 2–3 s, never faster', async () => {
    const front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, []);
    try {
      const c = new Client({ apiKey: stack.account.key, baseURL: `${front.origin}/v1` });
      const created = await c.generations.create({ model: 'lumen-lite', prompt: 'paced [sim:slow=6]' });
      const done = await c.generations.wait(created.id, { timeoutMs: 30_000 });
      expect(done.status).toBe('succeeded');
      const gets = front.requests.filter((r) => r.line.startsWith(`GET /v1/generations/${created.id} `));
      expect(gets[0]!.head).toMatch(/\nprefer: wait=\d+/);
      const gaps = gets.slice(1).map((g, i) => g.at - gets[i]!.at);
      console.log(`wait(): ${gets.length} GETs over ${done.status}, gaps ${gaps.join(', ')} ms`);
      if (hasPreferWait) {
        expect(gets.length).toBeLessThanOrEqual(2); // held until done
      } else {
        expect(gets.length).toBeGreaterThanOrEqual(2);
        for (const gap of gaps) {
          expect(gap).toBeGreaterThanOrEqual(1990);
          expect(gap).toBeLessThan(3500);
        }
        // The fallback asks no more holds of a server that showed it does not hold.
        for (const get of gets.slice(1)) expect(get.head).not.toContain('prefer:');
      }
    } finally {
      await front.close();
    }
  });

  it('insufficient credits: InsufficientCreditsError (402) with the request id, nothing charged', async () => {
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const poorClient = new Client({ apiKey: poor.key, baseURL: stack.listening.baseURL });
    const error = await poorClient.generations
      .create({ model: 'lumen-pro', prompt: 'too dear' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InsufficientCreditsError);
    expect(error).toMatchObject({ status: 402, code: 'insufficient_credits' });
    expect((error as InsufficientCreditsError).requestId).toMatch(/^gen_/);
    expect((await poorClient.credits.get()).credits).toBe(1);
  });

  it('list(): every generation, newest first, across pages; models and credits', async () => {
    const c = client();
    const all: Generation[] = [];
    for await (const g of c.generations.list({ limit: 2 })) all.push(g);
    const page = await c.generations.list({ limit: 100 }).firstPage();
    expect(all.map((g) => g.id)).toEqual(page.data.map((g) => g.id));
    expect(all.length).toBeGreaterThanOrEqual(4);
    const failed = [];
    for await (const g of c.generations.list({ status: 'failed' })) failed.push(g);
    expect(failed.every((g) => g.status === 'failed')).toBe(true);
    expect(failed.length).toBeGreaterThanOrEqual(1);

    const models = await c.models.list();
    expect(models.map((m) => m.id)).toContain('lumen-pro');
    const pro = await c.models.get('lumen-pro');
    expect(priceOf(pro, { resolution: '1K' })).toBe(pro.default_price);
    await expect(c.models.get('no-such-model')).rejects.toBeInstanceOf(NotFoundError);
    const balance = await c.credits.get();
    expect(balance.credits).toBe(balance.one_time_credits + balance.subscription_credits);
  });

  it.runIf(!hasCancel)(
    'cancel() on an API without POST /v1/generations/{id}/cancel: RouteNotAvailableError naming it',
    async () => {
      const created = await client().generations.create({
        model: 'lumen-lite',
        prompt: 'not cancelable here',
      });
      const error = await client()
        .generations.cancel(created.id)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RouteNotAvailableError);
      expect((error as Error).message).toContain('POST /v1/generations/{id}/cancel');
    },
  );

  it.runIf(!hasQuote)(
    'quote() on an API without POST /v1/generations/quote: RouteNotAvailableError naming it',
    async () => {
      const error = await client()
        .generations.quote({ model: 'lumen-lite', prompt: 'x' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RouteNotAvailableError);
      expect((error as Error).message).toContain('POST /v1/generations/quote');
    },
  );

  it.runIf(!hasKeyFilter)(
    'findByIdempotencyKey() on an API that ignores the filter: RouteNotAvailableError, never a wrong generation',
    async () => {
      await expect(client().generations.findByIdempotencyKey('whatever')).rejects.toBeInstanceOf(
        RouteNotAvailableError,
      );
    },
  );

  // The issue-20 routes: these run once the API has them.
  it.runIf(hasCancel)('cancel(): a queued generation is failed with canceled and refunded', async () => {
    const created = await client().generations.create({
      model: 'lumen-lite',
      prompt: 'cancel me [sim:queued=20]',
    });
    const canceled = await client().generations.cancel(created.id);
    expect(canceled).toMatchObject({
      id: created.id,
      status: 'failed',
      error: { code: 'canceled' },
      credits_refunded: true,
    });
  });

  it.runIf(hasCancel)(
    'run() with cancelOnAbort: aborting the wait cancels the generation (refunded)',
    async () => {
      const controller = new AbortController();
      const error = await client()
        .generations.run(
          { model: 'lumen-lite', prompt: 'cancel on abort [sim:queued=20]' },
          {
            signal: controller.signal,
            cancelOnAbort: true,
            onUpdate: () => setTimeout(() => controller.abort(), 100),
          },
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AbortedError);
      const after = await client().generations.get((error as AbortedError).generationId!);
      expect(after).toMatchObject({ status: 'failed', error: { code: 'canceled' }, credits_refunded: true });
    },
  );

  it.runIf(hasQuote)('quote(): the price of a body and whether it is affordable', async () => {
    const quote = await client().generations.quote({ model: 'lumen-pro', prompt: 'x', resolution: '2K' });
    expect(quote).toMatchObject({ model: 'lumen-pro', affordable: true });
    expect(quote.credits).toBe(priceOf(await client().models.get('lumen-pro'), { resolution: '2K' }));
  });

  it.runIf(hasKeyFilter)(
    'findByIdempotencyKey(): the generation a key made, null for a key never used',
    async () => {
      const created = await client().generations.create(
        { model: 'lumen-lite', prompt: 'find me' },
        { idempotencyKey: 'find-me-1' },
      );
      expect((await client().generations.findByIdempotencyKey('find-me-1'))?.id).toBe(created.id);
      expect(await client().generations.findByIdempotencyKey('never-used')).toBeNull();
    },
  );
});
