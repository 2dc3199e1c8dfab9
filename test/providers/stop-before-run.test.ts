import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FalQueueProvider } from '../../src/providers/fal/fal-queue-provider.js';
import type { ProviderJob } from '../../src/providers/provider.js';
import { ReplicateProvider } from '../../src/providers/replicate/replicate-provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';

/** A client's cancel at the real adapters, against the providers' protocol fakes. */
describe('stopBeforeRun: stopped only when the provider confirms the job never ran', () => {
  let storageDir: string;
  let storage: LocalStorage;
  let fal: FalQueueServer;
  let replicate: ReplicateServer;
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
  });
  afterAll(async () => {
    await fal?.close();
    await replicate?.close();
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

    it('IN_QUEUE: cancelled, and the request never runs', async () => {
      fal.script({ pollsInQueue: 100 });
      const { jobId } = await adapter().submit(job('fal-ai/flux/dev', { prompt: 'queued' }));
      expect(await adapter().stopBeforeRun(jobId)).toEqual({ stopped: true });
      const [request] = fal.accepted().slice(-1);
      expect(request!.cancelled).toBe(true);
      expect(await adapter().status(jobId)).toMatchObject({ state: 'failed' });
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
    });

    it('processing or succeeded: left alone, not stopped', async () => {
      replicate.script({ pollsStarting: 0, hold: true });
      const running = (await adapter().submit(job(schnell, { prompt: 'processing' }))).jobId;
      expect(await adapter().stopBeforeRun(running)).toEqual({ stopped: false });
      expect(replicate.accepted().find((p) => p.id === running)!.canceled).toBe(false);
    });
  });
});
