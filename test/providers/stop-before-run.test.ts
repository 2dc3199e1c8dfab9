import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FalQueueProvider } from '../../src/providers/fal/fal-queue-provider.js';
import type { ProviderJob } from '../../src/providers/provider.js';
import { claimCall, readCall } from '../../src/providers/openai/openai-calls.js';
import { OpenAiImagesProvider } from '../../src/providers/openai/openai-images-provider.js';
import { ReplicateProvider } from '../../src/providers/replicate/replicate-provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { OpenAiImagesServer } from '../support/providers/openai-images-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';

/** A client's cancel at the real adapters, against the providers' protocol fakes. */
describe('stopBeforeRun: stopped only when the provider confirms the job never ran', () => {
  let storageDir: string;
  let storage: LocalStorage;
  let fal: FalQueueServer;
  let replicate: ReplicateServer;
  let openai: OpenAiImagesServer;
  let db: TestDatabase;
  const download = { allowCidrs: ['127.0.0.1/32'], allowHttp: true };
  const job = (model: string, input: Record<string, unknown>): ProviderJob => ({
    token: `tok_${Math.random()}`,
    model: 'test-model',
    mediaType: 'image',
    prompt: String(input.prompt),
    options: {},
    images: [],
    longEdgePx: 1024,
    target: { model, input, referenceFields: [] },
  });

  beforeAll(async () => {
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'stop-before-run-'));
    storage = new LocalStorage(storageDir, 'http://127.0.0.1:9/results');
    fal = await FalQueueServer.start({ key: 'fal-key-stop' });
    replicate = await ReplicateServer.start({ token: 'r8_stop_token' });
    openai = await OpenAiImagesServer.start({ key: 'sk-stop-key' });
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await fal?.close();
    await replicate?.close();
    await openai?.close();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  describe('fal queue', () => {
    const adapter = () =>
      new FalQueueProvider({
        key: 'fal-key-stop',
        queueUrl: fal.origin,
        storage,
        download,
        createTimeoutMs: 2000,
      });

    it('IN_QUEUE: cancelled, the request never runs; fal’s answer cannot prove that, so its end decides', async () => {
      fal.script({ pollsInQueue: 100 });
      const { jobId } = await adapter().submit(job('fal-ai/flux/dev', { prompt: 'queued' }));
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: 'unknown' });
      const [request] = fal.accepted().slice(-1);
      expect(request!.cancelled).toBe(true);
      // It ends without an output (fal bills none): the workflow refunds it as the cancel's.
      expect(await adapter().status(jobId)).toMatchObject({ state: 'failed' });
    });

    it('a runner takes the request between our read and our cancel, and runs it on: unknown, and it delivers', async () => {
      fal.script({ pollsInQueue: 100, hold: true, ignoresCancel: true });
      const { jobId } = await adapter().submit(job('fal-ai/flux/dev', { prompt: 'picked up meanwhile' }));
      const request = fal.accepted().slice(-1)[0]!;
      fal.beforeCancel = (id) => fal.pickUp(id);
      try {
        // Read IN_QUEUE, then the PUT reaches a request a runner has: CANCELLATION_REQUESTED all the same.
        expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: 'unknown' });
      } finally {
        fal.beforeCancel = undefined;
      }
      expect(fal.accepted().slice(-1)[0]).toMatchObject({ cancelled: false, cancelIgnored: true });
      fal.release(request.id);
      // It ran to its end: an output, which fal bills.
      expect(await adapter().status(jobId)).toMatchObject({ state: 'succeeded' });
    });

    it('IN_PROGRESS or COMPLETED: left alone, not stopped', async () => {
      fal.script({ pollsInQueue: 0, hold: true });
      const running = (await adapter().submit(job('fal-ai/flux/dev', { prompt: 'running' }))).jobId;
      expect(await adapter().stopBeforeRun(running)).toEqual({ stopped: false });
      expect(fal.accepted().slice(-1)[0]!.cancelled).toBe(false);

      fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
      const done = (await adapter().submit(job('fal-ai/flux/dev', { prompt: 'done' }))).jobId;
      expect(await adapter().stopBeforeRun(done)).toEqual({ stopped: false });
      expect(fal.accepted().slice(-1)[0]!.cancelled).toBe(false);
    });

    it('asked again (the first answer lost): COMPLETED may be the lost cancel’s doing, so unknown', async () => {
      fal.script({ pollsInQueue: 100 });
      const { jobId } = await adapter().submit(job('fal-ai/flux/dev', { prompt: 'lost answer' }));
      fal.failCancel({ kind: 'drop', accepted: true });
      await expect(adapter().stopBeforeRun(jobId)).rejects.toThrow();
      expect(await adapter().stopBeforeRun(jobId, { again: true })).toEqual({ stopped: 'unknown' });

      // One that simply finished reads the same to fal's API: unknown again, and nothing is cancelled.
      fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
      const done = (await adapter().submit(job('fal-ai/flux/dev', { prompt: 'finished' }))).jobId;
      expect(await adapter().stopBeforeRun(done, { again: true })).toEqual({ stopped: 'unknown' });
      expect(fal.accepted().slice(-1)[0]!.cancelled).toBe(false);

      // Still IN_QUEUE when asked again: the first ask never reached fal; this one cancels it (its end decides).
      fal.script({ pollsInQueue: 100 });
      const queued = (await adapter().submit(job('fal-ai/flux/dev', { prompt: 'never reached' }))).jobId;
      fal.failCancel({ kind: 'status', status: 502 });
      await expect(adapter().stopBeforeRun(queued)).rejects.toThrow();
      expect(await adapter().stopBeforeRun(queued, { again: true })).toEqual({ stopped: 'unknown' });
      expect(fal.accepted().slice(-1)[0]!.cancelled).toBe(true);
    });
  });

  describe('Replicate', () => {
    const adapter = () =>
      new ReplicateProvider({
        apiUrl: replicate.env().REPLICATE_API_URL!,
        token: replicate.token,
        storage,
        download,
        cancelAfterMs: 6 * 3_600_000,
      });
    const schnell = 'black-forest-labs/flux-schnell';

    it('starting: canceled before it started (no started_at), so never run', async () => {
      replicate.script({ pollsStarting: 100 });
      const { jobId } = await adapter().submit(job(schnell, { prompt: 'starting' }));
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: true });
      expect(replicate.accepted().find((p) => p.id === jobId)!.canceled).toBe(true);
      expect(await adapter().status(jobId)).toMatchObject({ state: 'failed' });
      // Asked again (a retried activity whose first answer was lost): the same answer, no second cancel.
      const cancels = () => replicate.requests.filter((r) => r.url.endsWith(`${jobId}/cancel`)).length;
      expect(cancels()).toBe(1);
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: true });
      expect(cancels()).toBe(1);
    });

    it('started between our read and our cancel: canceled running, which Replicate bills; unknown, and its end says so', async () => {
      replicate.script({ pollsStarting: 100 });
      const { jobId } = await adapter().submit(job(schnell, { prompt: 'started meanwhile' }));
      replicate.beforeCancel = (id) => replicate.startNow(id);
      try {
        // Read `starting`; the cancel reaches a prediction a worker has just picked up.
        expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: 'unknown' });
      } finally {
        replicate.beforeCancel = undefined;
      }
      expect(replicate.accepted().find((p) => p.id === jobId)!.canceled).toBe(true);
      expect(await adapter().status(jobId)).toEqual({
        state: 'failed',
        message: 'The prediction was canceled at the provider.',
        canceledWhileRunning: true,
      });
      // Asked again (the answer lost): Replicate shows the same, and cannot say whose cancel it was.
      expect(await adapter().stopBeforeRun(jobId, { again: true })).toEqual({ stopped: 'unknown' });
    });

    it('canceled before it started, or aborted: failed, and nothing ran to bill', async () => {
      replicate.script({ pollsStarting: 100 });
      const { jobId } = await adapter().submit(job(schnell, { prompt: 'never started' }));
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: true });
      expect(await adapter().status(jobId)).toEqual({
        state: 'failed',
        message: 'The prediction was canceled at the provider.',
      });
      replicate.script({ final: 'aborted', pollsStarting: 0, pollsProcessing: 0 });
      const aborted = (await adapter().submit(job(schnell, { prompt: 'aborted' }))).jobId;
      expect(await adapter().status(aborted)).not.toHaveProperty('canceledWhileRunning');
    });

    it('processing or succeeded: left alone, not stopped', async () => {
      replicate.script({ pollsStarting: 0, hold: true });
      const running = (await adapter().submit(job(schnell, { prompt: 'processing' }))).jobId;
      expect(await adapter().stopBeforeRun(running)).toEqual({ stopped: false });
      expect(replicate.accepted().find((p) => p.id === running)!.canceled).toBe(false);
    });
  });

  describe('OpenAI: a call still pending is never sent; a sent one cannot be stopped', () => {
    const adapter = () =>
      new OpenAiImagesProvider(db.pool, {
        apiKey: 'sk-stop-key',
        baseUrl: `${openai.origin}/v1`,
        storage,
        download,
      });
    const submit = (prompt: string) =>
      adapter().submit(job('gpt-image-1', { prompt, size: '1024x1024', n: 1 }));
    const calls = (prompt: string) => openai.requests.filter((r) => r.body.includes(prompt)).length;

    it('pending: canceled in one statement, asked again still stopped, and the wait then sends nothing', async () => {
      const { jobId } = await submit('pending then canceled');
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: true });
      // A retried stop activity (its answer lost) must get the same answer.
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: true });
      expect(await adapter().status(jobId)).toMatchObject({ state: 'failed' });
      expect((await readCall(db.pool, jobId))!.state).toBe('canceled');
      expect(calls('pending then canceled')).toBe(0);
    });

    it('sent or answered: not stopped, and the call stands', async () => {
      const { jobId } = await submit('sent already');
      expect(await adapter().status(jobId)).toMatchObject({ state: 'succeeded' });
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: false });
      expect((await readCall(db.pool, jobId))!.state).toBe('succeeded');

      const claimed = (await submit('claimed, in flight')).jobId;
      expect(await claimCall(db.pool, claimed)).toBe(true);
      expect(await adapter().stopBeforeRun(claimed)).toEqual({ stopped: false });
      expect((await readCall(db.pool, claimed))!.state).toBe('sent');
    });

    it('a stop racing the claim: exactly one of them wins, every time', async () => {
      for (let round = 0; round < 20; round++) {
        const { jobId } = await submit(`race ${round}`);
        const [claimed, { stopped }] = await Promise.all([
          claimCall(db.pool, jobId),
          adapter().stopBeforeRun(jobId),
        ]);
        expect([claimed, stopped].filter(Boolean)).toHaveLength(1);
        expect((await readCall(db.pool, jobId))!.state).toBe(stopped ? 'canceled' : 'sent');
      }
    });
  });
});
