import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bearer, createPaidAccount } from '../support/api.js';
import { batchLines as lines, useBatchStack, waitForBatch } from '../support/batches.js';

/**
 * The JSON form of POST /v1/batches read as it arrives, like JSONL: past the API's body limit (2 KiB
 * here) up to the batch body limit (256 KiB here), each line checked as JSONL's are, the envelope
 * wherever it stands. The stack's batches are canceled once looked at: the worker stays idle.
 */
const bodyLimit = 2048;
const batchBodyLimit = 256 * 1024;
const maxLines = 400;

describe('batch bodies: the JSON form streamed', () => {
  const stack = useBatchStack({
    worker: { simDelayMs: 10 },
    apiEnv: {
      BODY_LIMIT_BYTES: String(bodyLimit),
      BATCH_BODY_LIMIT_BYTES: String(batchBodyLimit),
      BATCH_MAX_LINES: String(maxLines),
    },
    account: { oneTime: 1_000_000 },
  });

  const post = (
    key: string,
    payload: string,
    options: { type?: string; url?: string; idempotencyKey?: string } = {},
  ) =>
    stack.api.app.inject({
      method: 'POST',
      url: options.url ?? '/v1/batches',
      headers: {
        ...bearer(key),
        'content-type': options.type ?? 'application/json',
        ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
      },
      payload,
    });

  const batchesOf = (accountId: string) =>
    stack.db.pool.oneFirst(sql.type(z.object({ n: z.coerce.number() }))`
      SELECT count(*) AS n FROM batches WHERE account_id = ${accountId}`);

  const cancel = async (key: string, id: string) => {
    await stack.api.app.inject({ method: 'POST', url: `/v1/batches/${id}/cancel`, headers: bearer(key) });
    return waitForBatch(stack.api, key, id);
  };

  it('takes a JSON batch larger than the API body limit, every line stored, its envelope after the lines', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000_000 });
    const requests = lines(300);
    const body = JSON.stringify({ requests, completion_window: '2h', metadata: { run: 'streamed' } });
    expect(body.length).toBeGreaterThan(10 * bodyLimit);
    // The general limit is in force elsewhere: a generation's body this large is refused.
    const generation = await post(
      account.key,
      JSON.stringify({ model: 'lumen-pro', prompt: 'x'.repeat(bodyLimit) }),
      {
        url: '/v1/generations',
      },
    );
    expect(generation.statusCode).toBe(413);

    const created = await post(account.key, body, { idempotencyKey: 'streamed-1' });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    expect(batch).toMatchObject({
      completion_window: '2h',
      metadata: { run: 'streamed' },
      request_counts: { total: 300 },
    });
    expect(Date.parse(batch.expires_at) - Date.parse(batch.created_at)).toBeGreaterThan(7_190_000);
    expect(Date.parse(batch.expires_at) - Date.parse(batch.created_at)).toBeLessThan(7_260_000);
    const stored = await stack.db.pool.any(
      sql.type(
        z.object({ line: z.number(), custom_id: z.string(), request: z.record(z.string(), z.unknown()) }),
      )`SELECT line, custom_id, request FROM batch_lines WHERE batch_id = ${batch.id} ORDER BY line`,
    );
    expect(stored.map((r) => r.line)).toEqual(requests.map((_, i) => i));
    expect(stored.map((r) => ({ custom_id: r.custom_id, ...r.request }))).toEqual(requests);

    // The same request with the envelope first, and as JSONL: the same fingerprint, the same batch.
    const reordered = JSON.stringify({ metadata: { run: 'streamed' }, completion_window: '2h', requests });
    const again = await post(account.key, reordered, { idempotencyKey: 'streamed-1' });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().id).toBe(batch.id);
    const jsonl = requests.map((r) => JSON.stringify(r)).join('\n');
    const asJsonl = await post(account.key, jsonl, {
      type: 'application/x-ndjson',
      url: `/v1/batches?completion_window=2h&metadata=${encodeURIComponent('{"run":"streamed"}')}`,
      idempotencyKey: 'streamed-1',
    });
    expect(asJsonl.statusCode, asJsonl.body).toBe(200);
    expect(asJsonl.json().id).toBe(batch.id);
    // Another envelope with the same key: another request.
    const other = await post(account.key, JSON.stringify({ requests, completion_window: '3h' }), {
      idempotencyKey: 'streamed-1',
    });
    expect(other.statusCode).toBe(409);
    expect((await cancel(account.key, batch.id)).status).toBe('canceled');
  });

  it('refuses malformed JSON with a 400 envelope, and creates nothing', async () => {
    const account = await createPaidAccount(stack.db.pool);
    const truncated = JSON.stringify({ requests: lines(50) }).slice(0, -30);
    for (const payload of [truncated, '{"requests": [', '{"requests": [] } trailing', '']) {
      const response = await post(account.key, payload);
      expect(response.statusCode, payload.slice(-20)).toBe(400);
      expect(response.json()).toMatchObject({ error: { code: 'invalid_request' } });
    }
    expect((await post(account.key, truncated)).json().issues).toEqual([
      expect.objectContaining({ field: '', code: 'invalid_json' }),
    ]);
    for (const payload of [
      '[]',
      '{"requests": {}}',
      '{"completion_window": "1h"}',
      '{"requests": [], "requests": []}',
    ]) {
      const response = await post(account.key, payload);
      expect(response.statusCode, payload).toBe(400);
      expect(response.json().error.code).toBe('invalid_request');
    }
    expect(await batchesOf(account.accountId)).toBe(0);
  });

  it('refuses a bad line deep in the array as one 400 naming its index and custom_id; nothing created', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000_000 });
    const requests: Array<Record<string, unknown>> = lines(250);
    requests[237] = { custom_id: 'deep-bad', model: 'lumen-pro', prompt: 'x', aspect_ratio: '7:3' };
    const response = await post(account.key, JSON.stringify({ requests, completion_window: '1h' }));
    expect(response.statusCode, response.body).toBe(400);
    const { issues } = response.json();
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({
      field: 'requests[237].aspect_ratio',
      message: expect.stringMatching(/^Line 237 \(custom_id "deep-bad"\)/),
    });
    // A duplicate custom_id deep in it, and a bad envelope after the lines, each named.
    requests[237] = { ...lines(1)[0]!, custom_id: 'line-3' };
    const duplicate = await post(account.key, JSON.stringify({ requests, completion_window: '9y' }));
    expect(duplicate.statusCode).toBe(400);
    expect(duplicate.json().issues).toEqual([
      expect.objectContaining({ field: 'completion_window' }),
      expect.objectContaining({ field: 'requests[237].custom_id', code: 'duplicate' }),
    ]);
    // One line past BATCH_MAX_LINES: named at its index.
    const tooMany = await post(account.key, JSON.stringify({ requests: lines(maxLines + 1) }));
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().issues).toEqual([
      expect.objectContaining({ field: `requests[${maxLines}]`, code: 'too_big' }),
    ]);
    expect(await batchesOf(account.accountId)).toBe(0);
  });

  it('refuses a body past the batch body limit with a 413, JSON or JSONL; nothing created', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000_000 });
    const requests = lines(300, (i) => `line ${i} ${'y'.repeat(1_000)}`);
    const json = JSON.stringify({ requests });
    expect(json.length).toBeGreaterThan(batchBodyLimit);
    const response = await post(account.key, json);
    expect(response.statusCode, response.body).toBe(413);
    expect(response.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    const jsonl = await post(account.key, requests.map((r) => JSON.stringify(r)).join('\n'), {
      type: 'application/x-ndjson',
    });
    expect(jsonl.statusCode, jsonl.body).toBe(413);
    expect(await batchesOf(account.accountId)).toBe(0);
  });
});
