import { sql } from 'slonik';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiService } from '../../src/api/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/process/logger.js';
import { providerWebhookPath } from '../../src/providers/provider-push.js';
import { bearer } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { OtlpReceiver } from '../support/otlp-receiver.js';
import { promptContains } from '../support/providers/fake-http.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { usePushStack } from '../support/push-stack.js';
import { waitFor } from '../support/wait.js';
import { chainHistory } from '../support/workflow-runs.js';

/**
 * Replicate's pushes through the real API, workflow and worker: the submit sends the webhook, the
 * stand-in pushes the finished prediction signed with the account's secret, and the API verifies it
 * and signals the generation's workflow. Polls come every second here (PROVIDER_POLL_INTERVAL_MS),
 * so a push for a prediction that ends in 150 ms reaches a generation still waiting for it.
 */
// The API traces (OTEL_EXPORTER_OTLP_ENDPOINT) to a collector stand-in; spans leave in batches, a
// short delay keeps the test short (put back after the file: its process runs other files after it).
const receiver = await OtlpReceiver.start();
vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '100');
afterAll(async () => {
  vi.unstubAllEnvs();
  await receiver.close();
});

describe('Replicate pushes', () => {
  let replicate: ReplicateServer;
  beforeAll(async () => {
    replicate = await ReplicateServer.start();
  });
  afterAll(() => replicate?.close());
  const stack = usePushStack({
    providerEnv: () => replicate.env(),
    catalog: 'replicate',
    model: 'replicate-flux-schnell',
    // Reads on a timer: the first after the model's expected run time (2 s) and a grace of 1 s.
    env: {
      PROVIDER_POLL_INTERVAL_MS: '1000',
      PROVIDER_FALLBACK_READ_INTERVAL_MS: '1000',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    },
  });

  /** A generation on Replicate whose prediction ends `runMs` after its create; its id and prediction id once recorded. */
  const start = async (prompt: string, runMs = 150) => {
    replicate.script({ runMs }, promptContains(prompt));
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'replicate-flux-schnell',
      prompt,
    });
    expect(created.statusCode, created.body).toBe(202);
    const { id } = created.json<{ id: string }>();
    const job = await waitFor(() => stack.recordedJob(id));
    return { id, prediction: job.replace(/^replicate:/, '') };
  };
  /** Once the generation has succeeded (and the stand-in's deliveries are done). */
  const finish = async (id: string) => {
    const done = await pollGeneration(stack.api, stack.account.key, id, (g) => g.status !== 'queued', 20_000);
    expect(done.status).toBe('succeeded');
    await replicate.webhooks.settled();
  };
  const generate = async (prompt: string, runMs = 150) => {
    const started = await start(prompt, runMs);
    await finish(started.id);
    return started;
  };
  /** The stand-in's first delivery about the prediction, once answered. */
  const firstAnswered = (prediction: string) =>
    waitFor(() => {
      const [first] = replicate.webhooks.attemptsFor(prediction);
      return Promise.resolve(first?.status !== null && first);
    });
  const path = (generationId: string) => providerWebhookPath('replicate', generationId);
  const signed = (predictionId: string, body: string, timestamp?: number) =>
    replicate.webhooks.sign(predictionId, body, { timestamp });

  it('a verified push reaches the workflow: one providerJobEnded signal with the generation and its recorded job', async () => {
    const before = await stack.webhooks('replicate', 'signaled');
    const { id, prediction } = await generate('a pushed fox');
    // The create carried the webhook on PROVIDER_WEBHOOK_BASE_URL, for the end only.
    expect(replicate.accepted().find((p) => p.id === prediction)).toMatchObject({
      webhook: `${stack.origin}/provider-webhooks/replicate/${id}`,
      webhookEvents: ['completed'],
    });
    expect(replicate.webhooks.attemptsFor(prediction).map((a) => [a.kind, a.status, a.answer])).toEqual([
      ['genuine', 200, '{"received":true}'],
    ]);
    expect(await stack.signals(id)).toEqual([{ generationId: id, jobId: `replicate:${prediction}` }]);
    expect(await stack.webhooks('replicate', 'signaled')).toBe(before + 1);
  });

  it('with tracing on, a delivery’s trace goes on into the workflow: the signal is a span of the delivery’s, its context in the signal’s headers', async () => {
    const { id } = await generate('a traced fox');
    const workflowId = await workflowIdOf(stack.db.pool, id);
    const delivery = await waitFor(() =>
      Promise.resolve(
        receiver.spans.find(
          (s) =>
            s.service === 'generation-api' &&
            s.name === `POST /provider-webhooks/:provider/:generationId` &&
            String(s.attributes['url.path']).endsWith(`/${id}`),
        ) ?? null,
      ),
    );
    const signal = await waitFor(() =>
      Promise.resolve(
        receiver.spans.find(
          (s) =>
            s.name === 'SignalWorkflow:providerJobEnded' && s.attributes.temporalWorkflowId === workflowId,
        ) ?? null,
      ),
    );
    // In the delivery's trace, under its request's span.
    expect(signal.traceId).toBe(delivery.traceId);
    const ancestors = (span: typeof signal): string[] => {
      const parent = receiver.spans.find((s) => s.spanId === span.parentSpanId);
      return parent ? [parent.spanId, ...ancestors(parent)] : [];
    };
    expect(ancestors(signal)).toContain(delivery.spanId);
    // The workflow is handed the signal's context: its traceparent names the signal's span.
    const history = await chainHistory(stack.client, workflowId);
    const signaled = history.events!.map((e) => e.workflowExecutionSignaledEventAttributes).find(Boolean)!;
    const carrier = defaultPayloadConverter.fromPayload<{ traceparent: string }>(
      signaled.header!.fields!['_tracer-data']!,
    );
    expect(carrier.traceparent).toBe(`00-${signal.traceId}-${signal.spanId}-01`);
  });

  /** The stand-in's status reads of a prediction (besides its create). */
  const readsOf = (prediction: string) =>
    replicate.requests.filter((r) => r.method === 'GET' && r.url === `/v1/predictions/${prediction}`).length;

  it('the push ends the wait: the prediction is read once, when pushed, and no read on a timer comes', async () => {
    const { id, prediction } = await generate('a fox read once');
    expect(readsOf(prediction)).toBe(1);
    // Past the first fallback read's time (3 s from the submit): still the one read.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    expect(readsOf(prediction)).toBe(1);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a push that is lost: the fallback read after the expected run time finds the end, once', async () => {
    replicate.webhooks.lose();
    const started = Date.now();
    const { id, prediction } = await generate('a fox whose push is lost');
    expect(replicate.webhooks.attemptsFor(prediction)).toEqual([]);
    expect(await stack.signals(id)).toEqual([]);
    // Nothing read it before the expected run time and its grace (2 s + 1 s from the submit).
    expect(Date.now() - started).toBeGreaterThan(2_500);
    expect(readsOf(prediction)).toBe(1);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('forged and replayed deliveries are 401 and signal nothing, nor count against the address; a genuine one is taken', async () => {
    replicate.webhooks.forge();
    const { id, prediction } = await start('a forged fox');
    const forged = await firstAnswered(prediction);
    expect([forged!.kind, forged!.status, JSON.parse(forged!.answer)]).toEqual([
      'forged',
      401,
      {
        error: {
          code: 'unauthorized',
          message:
            'The delivery could not be verified: webhook-signature does not match the account’s secret.',
        },
      },
    ]);
    const body = forged!.body;
    const replayed = await stack.deliver(
      path(id),
      signed(prediction, body, Math.floor(Date.now() / 1000) - 600),
      body,
    );
    expect([replayed.status, replayed.body.error.code]).toEqual([401, 'unauthorized']);
    expect(replayed.body.error.message).toContain('webhook-timestamp');
    expect(await stack.signals(id)).toEqual([]);
    expect(stack.logs.some((l) => l.msg === 'a provider webhook was refused' && l.generationId === id)).toBe(
      true,
    );
    // The provider's genuine redelivery is taken.
    replicate.webhooks.redeliver(prediction);
    await replicate.webhooks.settled();
    expect(replicate.webhooks.attemptsFor(prediction).at(-1)).toMatchObject({
      kind: 'redelivered',
      status: 200,
    });
    await finish(id);

    // A burst from one address (more than its 20 failed authentications a minute) is refused one by
    // one, never 429, and a request with a wrong API key from there is still just 401.
    const refusedBefore = await stack.webhooks('replicate', 'refused');
    const burst = await Promise.all(
      Array.from({ length: 25 }, () => stack.deliver(path(id), signed(prediction, body, 1), body)),
    );
    expect(new Set(burst.map((r) => r.status))).toEqual(new Set([401]));
    expect(await stack.webhooks('replicate', 'refused')).toBe(refusedBefore + 25);
    const wrongKey = await stack.api.app.inject({ url: '/v1/credits', headers: bearer('sk_wrong') });
    expect(wrongKey.statusCode).toBe(401);
    // No API key is asked for: a genuine delivery without one is taken (late here: it has ended),
    // whatever its content type says (the bytes are what is signed); over 1 MiB is refused unread.
    expect((await stack.deliver(path(id), signed(prediction, body), body)).status).toBe(200);
    const asText = { ...signed(prediction, body), 'content-type': 'text/plain; charset=utf-8' };
    expect((await stack.deliver(path(id), asText, body)).status).toBe(200);
    const large = JSON.stringify({ id: prediction, logs: 'x'.repeat(1024 * 1024) });
    const tooLarge = await stack.deliver(path(id), signed(prediction, large), large);
    expect([tooLarge.status, tooLarge.body.error.code]).toEqual([413, 'payload_too_large']);
  });

  it('a duplicate delivery changes nothing twice: one signal, one charge', async () => {
    const signaled = await stack.webhooks('replicate', 'signaled');
    replicate.webhooks.duplicate();
    const { id, prediction } = await generate('a twice pushed fox');
    const attempts = replicate.webhooks.attemptsFor(prediction);
    expect(attempts.map((a) => [a.kind, a.status])).toEqual([
      ['genuine', 200],
      ['duplicate', 200],
    ]);
    expect(attempts[1]!.headers).toEqual(attempts[0]!.headers);
    // Both reached the waiting workflow; Temporal recorded the signal once (one request id per job).
    expect(await stack.webhooks('replicate', 'signaled')).toBe(signaled + 2);
    expect(await stack.signals(id)).toEqual([{ generationId: id, jobId: `replicate:${prediction}` }]);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a push for no generation of ours, or for another job, is 200 and logged; one after the end is 200, counted late', async () => {
    const { id, prediction } = await generate('an ended fox');
    const stranger = JSON.stringify({ id: 'p_not_ours', status: 'succeeded' });
    const unknownBefore = await stack.webhooks('replicate', 'unknown');
    expect((await stack.deliver(path('gen_nope'), signed('p_not_ours', stranger), stranger)).status).toBe(
      200,
    );
    expect(stack.logs.find((l) => l.generationId === 'gen_nope' && l.level === 40)?.msg).toBe(
      'a provider webhook names a generation this service does not have',
    );
    expect((await stack.deliver(path(id), signed('p_not_ours', stranger), stranger)).status).toBe(200);
    expect(stack.logs.find((l) => l.generationId === id && l.pushedJob === 'p_not_ours')).toMatchObject({
      level: 40,
      msg: 'a provider webhook names another job than the one its generation recorded',
      recordedJob: `replicate:${prediction}`,
    });
    expect(await stack.webhooks('replicate', 'unknown')).toBe(unknownBefore + 2);

    const lateBefore = await stack.webhooks('replicate', 'late');
    expect(replicate.webhooks.redeliver(prediction)).toBe(true);
    await replicate.webhooks.settled();
    expect(replicate.webhooks.attemptsFor(prediction).at(-1)).toMatchObject({
      kind: 'redelivered',
      status: 200,
    });
    expect(await stack.webhooks('replicate', 'late')).toBe(lateBefore + 1);
    expect(await stack.signals(id)).toHaveLength(1);
  });

  it('a provider this service takes no pushes from is 404; Temporal out of reach is 503, and the provider sends it again', async () => {
    for (const provider of ['openai', 'simulated', 'nobody']) {
      const answer = await stack.deliver(`/provider-webhooks/${provider}/gen_1`, {}, '{}');
      expect([answer.status, answer.body.error.code]).toEqual([404, 'not_found']);
    }
    // A prediction that runs until released: its generation waits for it.
    replicate.script({ hold: true }, promptContains('an unreachable fox'));
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'replicate-flux-schnell',
      prompt: 'an unreachable fox',
    });
    const { id } = created.json<{ id: string }>();
    const prediction = await waitFor(
      async () => (await stack.recordedJob(id))?.replace(/^replicate:/, '') ?? null,
    );
    const pushed = JSON.stringify({ id: prediction, status: 'succeeded' });
    // The same delivery to an API whose Temporal cannot be reached.
    const cut = await createApiService(
      loadConfig({
        DATABASE_URL: stack.db.url,
        TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
        ADMISSION_TIMEOUT_MS: '500',
        ...stack.worker.apiEnv,
        ...replicate.env(),
      }),
      createLogger('api-test', 'silent'),
    );
    try {
      const answer = await cut.app.inject({
        method: 'POST',
        url: path(id),
        headers: { 'content-type': 'application/json', ...signed(prediction, pushed) },
        payload: pushed,
      });
      expect([answer.statusCode, answer.json().error.code, answer.headers['retry-after']]).toEqual([
        503,
        'service_unavailable',
        '5',
      ]);
    } finally {
      await cut.close();
    }
    expect(await stack.signals(id)).toEqual([]);
    expect((await stack.deliver(path(id), signed(prediction, pushed), pushed)).status).toBe(200);
    expect(await stack.signals(id)).toEqual([{ generationId: id, jobId: `replicate:${prediction}` }]);
    // A workflow that has ended since the row was read (here: a workflow id with no run) waits for nothing: late.
    const late = await stack.webhooks('replicate', 'late');
    const workflowId = await workflowIdOf(stack.db.pool, id);
    await stack.db.pool.query(
      sql.unsafe`UPDATE generations SET workflow_id = ${`gone-${id}`} WHERE id = ${id}`,
    );
    expect((await stack.deliver(path(id), signed(prediction, pushed), pushed)).status).toBe(200);
    await stack.db.pool.query(
      sql.unsafe`UPDATE generations SET workflow_id = ${workflowId} WHERE id = ${id}`,
    );
    expect(await stack.webhooks('replicate', 'late')).toBe(late + 1);
    // Released, the stand-in pushes it too: the same end, recorded once.
    replicate.release(prediction);
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status !== 'queued', 20_000);
    await replicate.webhooks.settled();
    expect(await stack.signals(id)).toHaveLength(1);
  });
});
