import { rm } from 'node:fs/promises';
import type { ChildProcess } from 'node:child_process';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { importExampleCatalog } from '../support/example-catalog.js';
import { createGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { pngDataUri } from '../support/media.js';
import { promptContains } from '../support/providers/fake-http.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { startTcpRelay, type TcpRelay } from '../support/tcp-relay.js';
import { workerProcesses } from '../support/worker-process.js';

/**
 * Issue 19, item 0: a provider that takes no idempotency key (Replicate) must see each
 * generation's create once, whatever happens between the submit's statements. Real worker
 * processes reach PostgreSQL through a relay that the test cuts (a restart, as the worker sees it);
 * the test kills workers (SIGKILL) while a create is unanswered, restarts PostgreSQL between a
 * create's arrival and its answer being recorded, and kills and restarts workers throughout.
 * Afterwards every generation is terminal or in review, each was created at most once at the
 * provider (exactly once if it succeeded), and the ledger is exact.
 *
 * A killed holder's claim is kept for the shortest window allowed (25 s) unless
 * SUBMIT_CLAIM_WINDOW_MS says otherwise: `npm run test:faults` runs it with production's 60 s.
 */
describe('submitting under worker kills and PostgreSQL restarts', () => {
  let replicate: ReplicateServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let relay: TcpRelay;
  const taskQueue = `submit-chaos-${randomBase62(8)}`;
  const storageDir = `/tmp/submit-chaos-${taskQueue}`;
  const workers = workerProcesses(() => ({
    ...replicate.env(),
    DATABASE_URL: db.url.replace(/:\d+\//, `:${relay.port}/`),
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    PROVIDER_POLL_INTERVAL_MS: '200',
    // Unanswered creates are this test's doing, not an outage that should turn requests away.
    PROVIDER_DOWN_AFTER_FAILURES: '1000',
    // Still longer than any create's deadline: the takeovers are production's, after less waiting.
    SUBMIT_CLAIM_WINDOW_MS: process.env.SUBMIT_CLAIM_WINDOW_MS ?? '25000',
    LOG_LEVEL: 'warn',
  }));
  let worker: ChildProcess | undefined;
  const kill = async () => {
    const dying = worker;
    worker = undefined;
    if (!dying || dying.exitCode !== null) return;
    dying.kill('SIGKILL');
    await new Promise((resolve) => dying.once('exit', resolve));
  };
  const restartWorker = async () => {
    await kill();
    worker = await workers.start();
  };
  /** PostgreSQL goes away for the worker (every connection cut, none taken) and comes back. */
  const restartPostgres = async (downMs: number) => {
    const port = relay.port;
    await relay.close();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    relay = await startTcpRelay(pgTarget(), port);
  };
  const pgTarget = () => {
    const url = new URL(db.url);
    return { host: url.hostname, port: Number(url.port) };
  };
  /**
   * A POST whose worker is killed mid-answer may hear 503; its workflow goes on all the same. Its
   * prompt is its Idempotency-Key too, which the generation's row keeps: a failure that is refunded
   * discards the input, prompt and all.
   */
  const post = async (prompt: string, request: Record<string, unknown> = {}) => {
    const response = await createGeneration(
      api,
      account.key,
      { model: 'replicate-flux-schnell', prompt, ...request },
      prompt,
    );
    expect([202, 503], `${prompt}: ${response.body}`).toContain(response.statusCode);
  };
  const createsFor = (prompt: string) =>
    replicate.requests.filter(
      (r) => r.method === 'POST' && r.url.endsWith('/predictions') && r.body.includes(`"${prompt}"`),
    ).length;

  beforeAll(async () => {
    replicate = await ReplicateServer.start();
    db = await createTestDatabase();
    relay = await startTcpRelay(pgTarget());
    await importExampleCatalog(db.pool, 'replicate');
    api = await startTestApi(db.url, {
      ...replicate.env(),
      TEMPORAL_TASK_QUEUE: taskQueue,
      PROVIDER_POLL_INTERVAL_MS: '200',
      PROVIDER_DOWN_AFTER_FAILURES: '1000',
    });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    worker = await workers.start();
  });
  afterAll(async () => {
    workers.killAll();
    await relay?.close();
    await rm(storageDir, { recursive: true, force: true });
    await api?.close();
    await db?.drop();
    await replicate?.close();
  });

  it('creates each prediction once; every generation ends or waits in review; the ledger is exact', async () => {
    const prompts: string[] = [];
    const track = async (prompt: string, request?: Record<string, unknown>) => {
      prompts.push(prompt);
      await post(prompt, request);
    };

    // 1. A worker killed while its creates are unanswered (the provider has them).
    for (const n of [1, 2]) replicate.failCreate({ kind: 'hang' }, promptContains(`kill-unanswered-${n}`));
    const unanswered = Promise.all([1, 2].map((n) => track(`kill-unanswered-${n}`)));
    await expect
      .poll(() => createsFor('kill-unanswered-1') + createsFor('kill-unanswered-2'), { timeout: 30_000 })
      .toBe(2);
    await restartWorker();
    await unanswered;

    // 2. PostgreSQL restarts between a create's arrival and its answer being recorded.
    const relayPort = relay.port;
    let reopened: Promise<void> | undefined;
    replicate.beforeCreate = async (input) => {
      if (!promptContains('restart-before-record')(input) || reopened) return;
      // Cut now and back in 3 s: the create is answered meanwhile, and recording it fails.
      await relay.close();
      reopened = new Promise((resolve) => setTimeout(resolve, 3_000)).then(async () => {
        relay = await startTcpRelay(pgTarget(), relayPort);
      });
    };
    await track('restart-before-record-1');
    await expect.poll(() => createsFor('restart-before-record-1'), { timeout: 30_000 }).toBe(1);
    replicate.beforeCreate = undefined;
    await reopened;

    // 3. Kills and a restart while generations run their course; Replicate rejects one (422), an
    // edit with an inline image: it fails, refunded, and its staged image and input are discarded.
    // Replicate rejects that input every time: a rejection an attempt could not record (its worker
    // killed, PostgreSQL cut) is heard again by the next attempt, which sends the create again.
    const rejected = 'rejected-1';
    for (let n = 0; n < 5; n++)
      replicate.failCreate(
        { kind: 'status', status: 422, body: { detail: 'Invalid input' } },
        promptContains(rejected),
      );
    const inlineImage = await pngDataUri(64, 64);
    const running = Promise.all([
      ...[1, 2, 3, 4, 5, 6].map((n) => track(`churn-${n}`)),
      track(rejected, { model: 'replicate-flux-kontext-pro', images: [inlineImage] }),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await restartWorker();
    await restartPostgres(2_000);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await restartWorker();
    await running;

    // Every generation ends, or waits in review (an unanswered create waits out its claim's window first).
    const generations = () =>
      db.pool.any(
        sql.type(
          z.object({
            id: z.string(),
            prompt: z.string(),
            status: z.string(),
            needs_review: z.boolean(),
            content_expired: z.boolean(),
          }),
        )`SELECT id, idempotency_key AS prompt, status, needs_review, content_expired FROM generations WHERE account_id = ${account.accountId}`,
      );
    const open = async () => (await generations()).filter((g) => g.status === 'queued').map((g) => g.prompt);
    await expect.poll(open, { timeout: 150_000, interval: 1_000 }).toEqual([]);
    const rows = await generations();
    expect(rows.map((r) => r.prompt).sort()).toEqual([...prompts].sort());
    let spent = 0;
    for (const row of rows) {
      const { id } = row;
      const creates = createsFor(row.prompt);
      // At most one create of each, besides the rejected one's (refused creates make no prediction).
      if (row.prompt !== rejected) expect(creates, `${row.prompt} (${row.status})`).toBeLessThanOrEqual(1);
      if (row.status === 'succeeded') expect(creates).toBe(1);
      expect(['succeeded', 'failed']).toContain(row.status);
      const charges = await chargesOf(db.pool, id);
      const refunded = row.status === 'failed' && !row.needs_review;
      expect(charges, row.prompt).toMatchObject({ debits: 1, refunds: refunded ? 1 : 0 });
      spent -= charges.net;
    }
    // Each generation whose create was unanswered or unrecorded waits in review, unrefunded.
    for (const prompt of ['kill-unanswered-1', 'kill-unanswered-2']) {
      const row = rows.find((r) => r.prompt === prompt);
      expect(row).toMatchObject({ status: 'failed', needs_review: true });
    }
    // The rejected one: refused, no prediction made; failed, refunded, its input discarded.
    expect(rows.find((r) => r.prompt === rejected)).toMatchObject({
      status: 'failed',
      needs_review: false,
      content_expired: true,
    });
    expect(createsFor(rejected)).toBeGreaterThanOrEqual(1);
    expect(replicate.accepted().filter((p) => p.input.prompt === rejected)).toEqual([]);
    // Every other create that reached Replicate was accepted.
    expect(replicate.accepted().length).toBe(
      replicate.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/predictions')).length -
        createsFor(rejected),
    );
    const credits = (
      await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) })
    ).json().credits as number;
    expect(credits).toBe(100 - spent);
  }, 300_000);
});
