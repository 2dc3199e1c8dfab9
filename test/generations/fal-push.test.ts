import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerWebhookPath } from '../../src/providers/provider-push.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { FalQueueServer, falRequestError } from '../support/providers/fal-queue-server.js';
import { promptContains } from '../support/providers/fake-http.js';
import { usePushStack } from '../support/push-stack.js';
import { waitFor } from '../support/wait.js';

/**
 * fal's pushes through the real API, workflow and worker: the submit enqueues with `fal_webhook`,
 * the stand-in pushes the request's end signed with ED25519 (its JWKS at FAL_JWKS_URL), and the API
 * verifies it and signals the generation's workflow. Polls come every second here, so a push for a
 * request that ends in 150 ms reaches a generation still waiting for it.
 */
describe('fal pushes', () => {
  let fal: FalQueueServer;
  beforeAll(async () => {
    fal = await FalQueueServer.start();
  });
  afterAll(() => fal?.close());
  const stack = usePushStack({
    providerEnv: () => fal.env(),
    catalog: 'fal',
    model: 'fal-flux-schnell',
    env: { PROVIDER_POLL_INTERVAL_MS: '1000' },
  });

  /** A generation on fal whose request completes `runMs` after its create; its id, recorded job and request id. */
  const start = async (prompt: string, outcome: Parameters<FalQueueServer['script']>[0] = {}) => {
    fal.script({ runMs: 150, ...outcome }, promptContains(prompt));
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'fal-flux-schnell',
      prompt,
    });
    expect(created.statusCode, created.body).toBe(202);
    const { id } = created.json<{ id: string }>();
    const job = await waitFor(() => stack.recordedJob(id));
    return { id, job, request: job.split('::')[1]! };
  };
  /** The generation once it has ended (and the stand-in's deliveries are done). */
  const finish = async (id: string) => {
    const done = await pollGeneration(stack.api, stack.account.key, id, (g) => g.status !== 'queued', 20_000);
    await fal.webhooks.settled();
    return done;
  };
  const generate = async (prompt: string, outcome: Parameters<FalQueueServer['script']>[0] = {}) => {
    const started = await start(prompt, outcome);
    return { ...started, done: await finish(started.id) };
  };
  const path = (generationId: string) => providerWebhookPath('fal', generationId);
  const ok = (request: string) =>
    JSON.stringify({
      request_id: request,
      gateway_request_id: request,
      status: 'OK',
      payload: { images: [] },
    });

  it('a verified push reaches the workflow: one providerJobEnded signal with the generation and its recorded job', async () => {
    const { id, done, job, request } = await generate('a pushed heron');
    expect(done.status).toBe('succeeded');
    expect(job).toMatch(new RegExp(`^fal:fal-ai/flux/schnell::${request}::\\d+$`));
    // The enqueue carried the webhook on PROVIDER_WEBHOOK_BASE_URL.
    expect(fal.accepted().find((j) => j.id === request)?.webhook).toBe(
      `${stack.origin}/provider-webhooks/fal/${id}`,
    );
    expect(fal.webhooks.attemptsFor(request).map((a) => [a.kind, a.status])).toEqual([['genuine', 200]]);
    expect(await stack.signals(id)).toEqual([{ generationId: id, jobId: job }]);
  });

  it('a job that failed is pushed as ERROR: it wakes the generation, and the rules refund it as before', async () => {
    const { id, done, job, request } = await generate('a failing heron', {
      error: falRequestError('request_timeout', 504),
    });
    expect(JSON.parse(fal.webhooks.attemptsFor(request)[0]!.body)).toMatchObject({ status: 'ERROR' });
    expect(done).toMatchObject({
      status: 'failed',
      credits_refunded: true,
      error: { code: 'generation_failed' },
    });
    expect(await stack.signals(id)).toEqual([{ generationId: id, jobId: job }]);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1 });
  });

  it('forged, replayed and mismatched deliveries are 401 and signal nothing', async () => {
    fal.webhooks.forge();
    const { id, request } = await start('a forged heron');
    const forged = await waitFor(() => {
      const [first] = fal.webhooks.attemptsFor(request);
      return Promise.resolve(first?.status !== null && first);
    });
    expect([forged!.kind, forged!.status, JSON.parse(forged!.answer).error]).toEqual([
      'forged',
      401,
      {
        code: 'unauthorized',
        message: 'The delivery could not be verified: no key of fal’s JWKS verifies the signature.',
      },
    ]);
    const body = ok(request);
    const old = fal.webhooks.sign(request, body, { timestamp: Math.floor(Date.now() / 1000) - 600 });
    const replayed = await stack.deliver(path(id), old, body);
    expect([replayed.status, replayed.body.error.message]).toEqual([
      401,
      'The delivery could not be verified: X-Fal-Webhook-Timestamp is not within 5 minutes of now.',
    ]);
    // Signed for another request than the body names.
    const other = await stack.deliver(path(id), fal.webhooks.sign('another-request', body), body);
    expect(other.status).toBe(401);
    expect(await stack.signals(id)).toEqual([]);
    // fal's genuine redelivery is taken.
    fal.webhooks.redeliver(request);
    await fal.webhooks.settled();
    expect(fal.webhooks.attemptsFor(request).at(-1)).toMatchObject({ kind: 'redelivered', status: 200 });
    expect((await finish(id)).status).toBe('succeeded');
  });

  it('a duplicate delivery changes nothing twice: one signal, one charge', async () => {
    fal.webhooks.duplicate();
    const { id, job, request } = await generate('a twice pushed heron');
    expect(fal.webhooks.attemptsFor(request).map((a) => [a.kind, a.status])).toEqual([
      ['genuine', 200],
      ['duplicate', 200],
    ]);
    expect(await stack.signals(id)).toEqual([{ generationId: id, jobId: job }]);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a push before the generation recorded its job is 503 (sent again); unknown is 200 and logged; after the end, late', async () => {
    // The request ends, and is pushed, while the create's answer is still on its way to the worker.
    let early: { status: number; body: any } | undefined;
    fal.beforeCreateAnswer = async () => {
      fal.beforeCreateAnswer = undefined;
      const request = fal.accepted().at(-1)!.id;
      const generationId = new URL(fal.accepted().at(-1)!.webhook!).pathname.split('/').at(-1)!;
      early = await stack.deliver(path(generationId), fal.webhooks.sign(request, ok(request)), ok(request));
    };
    const earlyBefore = await stack.webhooks('fal', 'early');
    const { id, request } = await generate('an early heron');
    expect([early?.status, early?.body.error.code]).toEqual([503, 'service_unavailable']);
    expect(await stack.webhooks('fal', 'early')).toBe(earlyBefore + 1);

    const unknownBefore = await stack.webhooks('fal', 'unknown');
    const stranger = ok('not-ours');
    expect(
      (await stack.deliver(path('gen_nope'), fal.webhooks.sign('not-ours', stranger), stranger)).status,
    ).toBe(200);
    expect(stack.logs.find((l) => l.generationId === 'gen_nope')).toMatchObject({
      level: 40,
      msg: 'a provider webhook names a generation this service does not have',
      pushedJob: 'not-ours',
    });
    expect(await stack.webhooks('fal', 'unknown')).toBe(unknownBefore + 1);

    const lateBefore = await stack.webhooks('fal', 'late');
    expect(fal.webhooks.redeliver(request)).toBe(true);
    await fal.webhooks.settled();
    expect(fal.webhooks.attemptsFor(request).at(-1)).toMatchObject({ kind: 'redelivered', status: 200 });
    expect(await stack.webhooks('fal', 'late')).toBe(lateBefore + 1);
    expect(await stack.signals(id)).toHaveLength(1);
  });
});
