import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BatchWaitTimeoutError,
  Client,
  InvalidRequestError,
  ServiceUnavailableError,
  type Batch,
  type BatchEvent,
  type BatchResultLine,
} from '../../clients/typescript/src/index.js';
import { downloadBatch, folderOf, jsonlFile } from '../../clients/typescript/src/node/index.js';
import { Pager } from '../../clients/typescript/src/resources/pager.js';
import { balanceOf, batchCharges, batchLines } from '../support/batches.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { startFaultyFront } from '../support/faulty-front.js';
import { useListeningBatchStack } from './client-stack.js';

describe('batches with the TypeScript client (real stack)', () => {
  const stack = useListeningBatchStack({
    worker: { simDelayMs: 20 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '4' },
    account: { oneTime: 10_000 },
  });
  const client = () => new Client({ apiKey: stack.account.key, baseURL: stack.listening.baseURL });
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'client-batches-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('create from a list, wait, results in input order, download into custom_id folders (resumable)', async () => {
    const requests = batchLines(4).map((line, i) => ({
      ...line,
      custom_id: ['a/b', '..', 'plain', 'c d'][i]!,
    }));
    const updates: Batch[] = [];
    const created = await client().batches.create({ requests, metadata: { run: 'list' } });
    expect(created).toMatchObject({ id: expect.stringMatching(/^batch_/), request_counts: { total: 4 } });
    const done = await client().batches.wait(created.id, {
      pollIntervalMs: 100,
      onUpdate: (b) => updates.push(b),
    });
    expect(done).toMatchObject({ status: 'completed', request_counts: { succeeded: 4, pending: 0 } });
    expect(updates.at(-1)).toEqual(done);

    const lines: BatchResultLine[] = [];
    for await (const line of client().batches.results(created.id)) lines.push(line);
    expect(lines.map((l) => [l.line, l.custom_id, l.generation?.status])).toEqual(
      requests.map((r, i) => [i, r.custom_id, 'succeeded']),
    );
    // Resumed after line 1: only the lines after it.
    const rest: number[] = [];
    for await (const line of client().batches.results(created.id, { after: 1 })) rest.push(line.line);
    expect(rest).toEqual([2, 3]);

    const out = path.join(dir, 'list');
    const seen: string[] = [];
    const first = await downloadBatch(client(), created.id, out, { onLine: (l) => seen.push(l.custom_id) });
    expect(seen).toEqual(requests.map((r) => r.custom_id));
    expect(first.files).toHaveLength(4);
    // Every custom_id is one folder inside `out`, none outside it.
    expect((await readdir(out)).sort()).toEqual(['%2E%2E', 'a%2Fb', 'c d', 'plain']);
    expect(folderOf('a/b')).toBe('a%2Fb');
    const image = first.files.find((f) => f.path.includes(`${path.sep}plain${path.sep}`))!;
    expect(await sharp(image.path).metadata()).toMatchObject({ width: 1024, height: 1024 });
    // Again: nothing fetched twice, nothing overwritten, the same files.
    await rm(first.files[0]!.path);
    const again = await downloadBatch(client(), created.id, out);
    expect(again.files.map((f) => f.path).sort()).toEqual(first.files.map((f) => f.path).sort());
  });

  it("events(id): the batch's own events as they happen, ending with its end event; resumed after lastEventId", async () => {
    const created = await client().batches.create({ requests: batchLines(2) });
    const events: BatchEvent[] = [];
    // The iteration ends by itself: the server ends the stream after batch.completed.
    for await (const event of client().batches.events(created.id)) events.push(event);
    expect(events[0]).toMatchObject({ id: 1, type: 'batch.created', data: { id: created.id } });
    expect(events.map((e) => e.type)).toContain('batch.progress');
    expect(events.at(-1)).toMatchObject({ type: 'batch.completed', data: { status: 'completed' } });
    const rest: number[] = [];
    for await (const event of client().batches.events(created.id, { lastEventId: 1 })) rest.push(event.id);
    expect(rest).toEqual(events.slice(1).map((e) => e.id));
  });

  it('create from a JSONL file (streamed), listed with the cursor pager, a bad line refused whole', async () => {
    const file = path.join(dir, 'requests.jsonl');
    await writeFile(
      file,
      batchLines(3)
        .map((l) => JSON.stringify(l))
        .join('\n') + '\n',
    );
    // Quoted first: the same lines, checked the same way, nothing made.
    expect(await client().batches.quote({ jsonl: jsonlFile(file) })).toMatchObject({
      lines: 3,
      credits: expect.any(Number),
      affordable: true,
    });
    const created = await client().batches.create(
      { jsonl: jsonlFile(file), completion_window: '1h', metadata: { run: 'file' } },
      { idempotencyKey: 'sdk-batch-file' },
    );
    expect(created).toMatchObject({
      completion_window: '1h',
      metadata: { run: 'file' },
      request_counts: { total: 3 },
    });
    // The same key and file: the same batch.
    const replay = await client().batches.create(
      { jsonl: jsonlFile(file), completion_window: '1h', metadata: { run: 'file' } },
      { idempotencyKey: 'sdk-batch-file' },
    );
    expect(replay.id).toBe(created.id);
    const done = await client().batches.wait(created, { pollIntervalMs: 100 });
    expect(done.request_counts.succeeded).toBe(3);

    const ids: string[] = [];
    for await (const batch of client().batches.list({ limit: 1 })) ids.push(batch.id);
    expect(ids.slice(0, 1)).toEqual([created.id]);
    expect(ids.length).toBeGreaterThanOrEqual(2);
    // One pager for every list (the generations' too): a page, then the next one when asked for.
    const pager = client().batches.list({ limit: 1 });
    expect(pager).toBeInstanceOf(Pager);
    expect(client().generations.list()).toBeInstanceOf(Pager);
    const first = await pager.firstPage();
    expect([first.data.map((b) => b.id), first.hasNextPage()]).toEqual([[created.id], true]);
    expect((await first.nextPage())?.data.map((b) => b.id)).toEqual(ids.slice(1, 2));

    const bad = await client()
      .batches.create({
        jsonl: `${JSON.stringify(batchLines(1)[0])}\n{"custom_id":"x","model":"lumen-pro"}\n`,
      })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(InvalidRequestError);
    expect(JSON.stringify((bad as InvalidRequestError).issues)).toContain('line 1');
  });

  it('cancel: lines not started end canceled and uncharged; wait times out cheaply while it runs', async () => {
    const before = await balanceOf(stack.db.pool, stack.account.accountId);
    const requests = batchLines(8, (i) => `slow ${i} [sim:slow=2]`);
    const created = await client().batches.create({ requests });
    const timeout = await client()
      .batches.wait(created.id, { timeoutMs: 200, pollIntervalMs: 50 })
      .catch((e: unknown) => e);
    expect(timeout).toBeInstanceOf(BatchWaitTimeoutError);
    const canceling = await client().batches.cancel(created.id);
    expect(['canceling', 'canceled']).toContain(canceling.status);
    const done = await client().batches.wait(created.id, { pollIntervalMs: 100 });
    expect(done.status).toBe('canceled');
    expect(done.request_counts.canceled).toBeGreaterThan(0);
    const charges = await batchCharges(stack.db.pool, created.id);
    expect(charges.generations).toBe(8 - done.request_counts.canceled);
    // Only lines that started were charged, each once; canceled ones never.
    expect(await balanceOf(stack.db.pool, stack.account.accountId)).toBe(before + charges.net);
    const lines: BatchResultLine[] = [];
    for await (const line of client().batches.results(created.id)) lines.push(line);
    expect(lines).toHaveLength(8);
    expect(lines.filter((l) => l.error?.code === 'batch_canceled')).toHaveLength(
      done.request_counts.canceled,
    );
  });

  it('a create whose answer is lost is retried with the same key and the file read again; results retried after a 503', async () => {
    const file = path.join(dir, 'dropped.jsonl');
    await writeFile(
      file,
      batchLines(3)
        .map((l) => JSON.stringify(l))
        .join('\n') + '\n',
    );
    const front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, [
      { requestLine: 'POST /v1/batches?', fault: { kind: 'drop-answer' } },
      { requestLine: 'GET /v1/batches/batch_', fault: { kind: 'answer', status: 503 } },
    ]);
    try {
      const viaFront = new Client({ apiKey: stack.account.key, baseURL: `${front.origin}/v1` });
      const created = await viaFront.batches.create({ jsonl: jsonlFile(file), metadata: { run: 'dropped' } });
      const posts = front.requests.filter((r) => r.line.startsWith('POST /v1/batches?'));
      expect(posts).toHaveLength(2);
      const keys = posts.map((p) => /idempotency-key: (\S+)/.exec(p.head)?.[1]);
      expect(keys[0]).toBeDefined();
      expect(keys[1]).toBe(keys[0]);
      // One batch made, the first attempt's.
      const dropped: string[] = [];
      for await (const batch of client().batches.list())
        if (batch.metadata?.run === 'dropped') dropped.push(batch.id);
      expect(dropped).toEqual([created.id]);
      await client().batches.wait(created.id, { pollIntervalMs: 100 });
      const lines: number[] = [];
      for await (const line of viaFront.batches.results(created.id)) lines.push(line.line);
      expect(lines).toEqual([0, 1, 2]);
      expect(front.remaining()).toEqual([0, 0]);
    } finally {
      await front.close();
    }
  });
  it('a results read cut short by a failed page ends with an error line, which the client reports', async () => {
    // A batch of 502 ended lines, made in PostgreSQL: the results' second page (lines 500 on) holds
    // line 501, whose stored error is not one the reader accepts, so that page fails to read.
    const { accountId, keyId } = stack.account;
    const id = `batch_cut${randomBase62(10)}`;
    await stack.db.pool.query(sql.unsafe`
      INSERT INTO batches (id, account_id, api_key_id, workflow_id, fingerprint, status, completion_window,
                           line_count, quoted_credits, expires_at, completed_at)
      VALUES (${id}, ${accountId}, ${keyId}, ${id}, 'cut', 'canceled', '24h', 502, 0, now(), now())`);
    await stack.db.pool.query(sql.unsafe`
      INSERT INTO batch_lines (batch_id, line, custom_id, request, state, error, ended_at)
      SELECT ${id}, i, 'line-' || i, '{}'::jsonb, CASE WHEN i = 501 THEN 'refused' ELSE 'canceled' END,
             CASE WHEN i = 501 THEN '{"unreadable": true}'::jsonb END, now()
      FROM generate_series(0, 501) AS i`);

    const response = await fetch(`${stack.listening.baseURL}/batches/${id}/results`, {
      headers: { authorization: `Bearer ${stack.account.key}` },
    });
    expect(response.status).toBe(200);
    const lines = (await response.text())
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(lines).toHaveLength(501);
    expect(lines.at(-2)).toMatchObject({ line: 499, error: { code: 'batch_canceled' } });
    expect(lines.at(-1)).toEqual({
      error: {
        code: 'service_unavailable',
        message:
          'The results could not be read to their end: this read stops after line 499. Read them again with ?after=499.',
      },
    });

    // The client reads up to the cut and reports it (as a 503: without retries, at once); with a
    // retry, it reads again after line 499, whose first page fails (a 500), and reports that.
    const readAll = async (maxRetries: number) => {
      const read: number[] = [];
      const client = new Client({ apiKey: stack.account.key, baseURL: stack.listening.baseURL, maxRetries });
      const failure = await (async () => {
        for await (const line of client.batches.results(id)) read.push(line.line);
      })().catch((error: unknown) => error);
      return { read, failure };
    };
    const once = await readAll(0);
    expect(once.read).toEqual(Array.from({ length: 500 }, (_, i) => i));
    expect(once.failure).toBeInstanceOf(ServiceUnavailableError);
    const retried = await readAll(1);
    expect(retried.read).toEqual(once.read);
    expect(retried.failure).toMatchObject({ status: 500 });
  });
});
