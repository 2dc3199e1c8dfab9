import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GenerationEventStreams } from '../../src/api/generation-event-streams.js';
import { StreamSlots } from '../../src/api/stream-slots.js';
import { generationEventsAfter } from '../../src/db/generation-events.js';
import { newId } from '../../src/vocabulary/ids.js';
import { createLogger } from '../../src/process/logger.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/** The process's stream hub on its own, on a real database: how many reads, what each sink gets. */
describe('GenerationEventStreams', () => {
  let db: TestDatabase;
  let account: TestAccount;
  let reads = 0;
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool);
  });
  afterAll(() => db?.drop());

  const log = createLogger('test', 'silent');
  const slotsWith = (options: { perKey?: number; perAccount?: number; perProcess?: number } = {}) =>
    new StreamSlots({
      ...options,
      // Every key may call: revocation is tested through the API (event-stream-slots.test.ts).
      keysThatMayCall: (keyIds) => Promise.resolve(new Set(keyIds)),
      listening: () => true,
      log,
    });
  const hub = (slots = slotsWith()) =>
    new GenerationEventStreams({
      slots,
      read: (id, after, limit) => {
        reads += 1;
        return generationEventsAfter(db.pool, id, after, { limit, withNewest: true });
      },
      listening: () => true,
      log,
    });
  const owner = (keyId: string, accountId = 'acct_a') => ({ keyId, accountId });
  const sink = () => {
    const s = { text: '', ended: false, write: (t: string) => (s.text += t), end: () => (s.ended = true) };
    return s;
  };
  const newGeneration = async () => {
    const id = newId('gen');
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, credits, input)
      VALUES (${id}, ${account.accountId}, ${account.keyId}, 'queued', 'lumen-lite', 'image', 2, '{"prompt":"x"}')`);
    return id;
  };
  const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

  it('a stream opened behind a read in flight gets every event after its own place, none skipped', async () => {
    // The read in flight began after event 2 (the one stream open then had seen it); a stream that
    // resumes after event 1 meanwhile must still get event 2 (before: it got 3 only).
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let held = false;
    let readsDone = 0;
    const streams = new GenerationEventStreams({
      slots: slotsWith(),
      read: async (id, after, limit) => {
        if (held) await gate;
        const rows = await generationEventsAfter(db.pool, id, after, { limit, withNewest: true });
        readsDone += 1;
        return rows;
      },
      listening: () => true,
      log,
    });
    const id = await newGeneration();
    await db.pool.query(sql.unsafe`UPDATE generations SET credits_refunded = true WHERE id = ${id}`);
    const [ahead, behind] = [sink(), sink()];
    streams.open(id, owner('key_a'), 2, ahead);
    await expect.poll(() => readsDone).toBe(1); // its first read, done: nothing new for it
    held = true;
    await db.pool.query(sql.unsafe`UPDATE generations SET provider_job_id = 'job-1' WHERE id = ${id}`);
    streams.changed(id); // the read from event 2 is now in flight, held at the gate
    streams.open(id, owner('key_b'), 1, behind);
    held = false;
    release();
    await expect.poll(() => ids(behind.text)).toEqual([2, 3]);
    expect(ids(ahead.text)).toEqual([3]);
    streams.close();
  });

  it('one read per change for all the streams of a generation; each gets what it has not seen; ended after the terminal event', async () => {
    const streams = hub();
    const id = await newGeneration();
    const [a, b] = [sink(), sink()];
    streams.open(id, owner('key_a'), 0, a);
    await expect.poll(() => ids(a.text)).toEqual([1]);
    await db.pool.query(sql.unsafe`UPDATE generations SET credits_refunded = true WHERE id = ${id}`);
    streams.open(id, owner('key_b'), 1, b); // resumed after event 1
    await expect.poll(() => [ids(a.text), ids(b.text)]).toEqual([[1, 2], [2]]);
    reads = 0;
    await db.pool.query(
      sql.unsafe`UPDATE generations SET status = 'failed', error = '{"code":"x","message":"y"}' WHERE id = ${id}`,
    );
    streams.changed(id); // what the generation_event notification does
    await expect.poll(() => [a.ended, b.ended]).toEqual([true, true]);
    expect(reads).toBe(1);
    expect(ids(a.text)).toEqual([1, 2, 3]);
    expect(ids(b.text)).toEqual([2, 3]);
    expect([a.ended, b.ended]).toEqual([true, true]);
    expect(streams.size).toBe(0);
    streams.close();
  });

  it('caps per key, per account and per process; close() ends every open stream', async () => {
    const slots = slotsWith({ perKey: 2, perAccount: 3, perProcess: 4 });
    const streams = hub(slots);
    const id = await newGeneration();
    const sinks = [sink(), sink(), sink(), sink()];
    expect(streams.open(id, owner('k1'), 0, sinks[0]!)).not.toBeNull();
    expect(streams.open(id, owner('k1'), 0, sinks[1]!)).not.toBeNull();
    expect(slots.hasRoomFor(owner('k1'))).toBe(false);
    expect(streams.open(id, owner('k1'), 0, sink())).toBeNull();
    const detach = streams.open(id, owner('k2'), 0, sinks[2]!);
    expect(streams.open(id, owner('k3'), 0, sink())).toBeNull(); // the account's cap, with another key
    expect(streams.open(id, owner('k4', 'acct_b'), 0, sinks[3]!)).not.toBeNull();
    expect(streams.open(id, owner('k5', 'acct_c'), 0, sink())).toBeNull(); // the process's cap
    detach!();
    detach!(); // twice is once
    expect(slots.size).toBe(3);
    expect(slots.hasRoomFor(owner('k3'))).toBe(true);
    slots.close();
    streams.close();
    expect(sinks.map((s) => s.ended)).toEqual([true, true, false, true]); // the detached one is the route's to end
    expect(slots.hasRoomFor(owner('k3'))).toBe(false);
    expect(slots.size).toBe(0);
  });
});
