import { sql } from 'slonik';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { releaseProviderSlot, takeProviderSlot, type PlaceClaim } from '../../src/db/provider-slots.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Provider places shared fairly (issue 38 §2), on PostgreSQL: interactive generations go first,
 * batch lines hold at most their share of the cap, and free places go round-robin between the
 * accounts (and the batches of one account) whose lines wait. Each "try" is what a submit attempt
 * does; a refused one tries again later, as the activity's retry does.
 */
describe('provider places in the fair order', () => {
  let db: TestDatabase;
  const accounts: string[] = [];
  let serial = 0;
  const provider = 'simulated';

  beforeAll(async () => {
    db = await createTestDatabase();
    for (let i = 0; i < 3; i++) accounts.push((await createPaidAccount(db.pool, { oneTime: 10 })).accountId);
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(async () => {
    await db.pool.query(sql.unsafe`DELETE FROM provider_place_waiters`);
    await db.pool.query(sql.unsafe`DELETE FROM provider_slots`);
  });

  /** A generation in flight (queued), as admission leaves it. */
  async function generation(accountId: string): Promise<string> {
    const id = `gen_fair${String(++serial).padStart(16, '0')}`;
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, status, model, media_type, credits, created_at)
      VALUES (${id}, ${accountId}, 'queued', 'lumen-lite', 'image', 1, now())`);
    return id;
  }
  const interactive = (accountId: string): PlaceClaim => ({ lane: 'interactive', accountId });
  const batchLine = (accountId: string, batchId: string): PlaceClaim => ({
    lane: 'batch',
    accountId,
    batchId,
  });
  const take = (id: string, claim: PlaceClaim, cap = 4, batchShare = 1) =>
    takeProviderSlot(db.pool, id, provider, claim, { cap, batchShare });

  /** Tries every waiter once, in the order given; the ids that got a place. */
  async function tryAll(waiters: { id: string; claim: PlaceClaim }[], cap = 4, share = 1) {
    const got: string[] = [];
    for (const waiter of waiters) if (await take(waiter.id, waiter.claim, cap, share)) got.push(waiter.id);
    return got;
  }

  it('gives a freed place to the interactive generation waiting, not to batch lines that tried first', async () => {
    const [a, b] = accounts as [string, string];
    const lines = await Promise.all([1, 2, 3, 4, 5, 6].map(() => generation(a)));
    const held = await tryAll(lines.map((id) => ({ id, claim: batchLine(a, 'batch_a') })));
    expect(held).toEqual(lines.slice(0, 4));
    const waitingLines = lines.slice(4);
    const person = await generation(b);
    expect(await take(person, interactive(b))).toBe(false); // the cap is full: it waits
    await releaseProviderSlot(db.pool, lines[0]!);
    // The batch lines try first, and are refused: the interactive one is ahead of them.
    expect(await tryAll(waitingLines.map((id) => ({ id, claim: batchLine(a, 'batch_a') })))).toEqual([]);
    expect(await take(person, interactive(b))).toBe(true);
  });

  it('keeps batch lines within their share of the cap, so an interactive one finds a place at once', async () => {
    const [a, b] = accounts as [string, string];
    const lines = await Promise.all(Array.from({ length: 10 }, () => generation(a)));
    const held = await tryAll(
      lines.map((id) => ({ id, claim: batchLine(a, 'batch_a') })),
      10,
      0.8,
    );
    expect(held).toHaveLength(8); // 80 % of 10
    const person = await generation(b);
    expect(await take(person, interactive(b), 10, 0.8)).toBe(true);
    // With no interactive one waiting, batch lines still stop at their share.
    expect(
      await tryAll(
        lines.slice(8).map((id) => ({ id, claim: batchLine(a, 'batch_a') })),
        10,
        0.8,
      ),
    ).toEqual([]);
  });

  it('never gives batch lines a provider’s only place (issue 45): an interactive one finds it free', async () => {
    const [a, b] = accounts as [string, string];
    const line = await generation(a);
    // Nothing held, nobody waiting: still not the last place.
    expect(await take(line, batchLine(a, 'batch_a'), 1, 0.8)).toBe(false);
    const person = await generation(b);
    expect(await take(person, interactive(b), 1, 0.8)).toBe(true);
    // With two places, batch lines hold one and leave the other.
    await releaseProviderSlot(db.pool, person);
    const lines = await Promise.all([1, 2].map(() => generation(a)));
    expect(
      await tryAll(
        lines.map((id) => ({ id, claim: batchLine(a, 'batch_a') })),
        2,
        0.8,
      ),
    ).toEqual([lines[0]]);
    // A share of the whole cap is the operator's choice: then batch lines may take every place.
    expect(await take(line, batchLine(a, 'batch_a'), 1, 1)).toBe(false); // the one place is another's now
    await releaseProviderSlot(db.pool, lines[0]!);
    expect(await take(line, batchLine(a, 'batch_a'), 1, 1)).toBe(true);
  });

  it('goes round-robin between accounts: one account’s many lines do not starve another’s few', async () => {
    const [a, b] = accounts as [string, string];
    const many = await Promise.all(Array.from({ length: 12 }, () => generation(a)));
    const few = await Promise.all([1, 2].map(() => generation(b)));
    // Account A's lines are waiting before B's arrive; A holds every place.
    const first = await tryAll(many.map((id) => ({ id, claim: batchLine(a, 'batch_a') })));
    expect(first).toEqual(many.slice(0, 4));
    expect(await tryAll(few.map((id) => ({ id, claim: batchLine(b, 'batch_b') })))).toEqual([]);
    // Two places free: B holds none and A holds 2, so B's two lines take both, though A's waited longer.
    await releaseProviderSlot(db.pool, many[0]!);
    await releaseProviderSlot(db.pool, many[1]!);
    const waitingA = many.slice(4).map((id) => ({ id, claim: batchLine(a, 'batch_a') }));
    const waitingB = few.map((id) => ({ id, claim: batchLine(b, 'batch_b') }));
    expect(await tryAll([...waitingA, ...waitingB])).toEqual(few);
  });

  it('goes round-robin between the batches of one account too', async () => {
    const [, , c] = accounts as [string, string, string];
    const big = await Promise.all(Array.from({ length: 8 }, () => generation(c)));
    const small = await generation(c);
    expect(await tryAll(big.map((id) => ({ id, claim: batchLine(c, 'batch_big') })))).toEqual(
      big.slice(0, 4),
    );
    expect(await take(small, batchLine(c, 'batch_small'))).toBe(false);
    await releaseProviderSlot(db.pool, big[0]!);
    const waitingBig = big.slice(4).map((id) => ({ id, claim: batchLine(c, 'batch_big') }));
    expect(await tryAll([...waitingBig, { id: small, claim: batchLine(c, 'batch_small') }])).toEqual([small]);
  });

  it('passes over a waiter that stopped trying', async () => {
    const [a, b] = accounts as [string, string];
    const lines = await Promise.all([1, 2, 3, 4].map(() => generation(a)));
    await tryAll(lines.map((id) => ({ id, claim: batchLine(a, 'batch_a') })));
    const gone = await generation(b);
    expect(await take(gone, interactive(b))).toBe(false);
    // Its worker died: its last try was long ago.
    await db.pool.query(
      sql.unsafe`UPDATE provider_place_waiters SET tried_at = now() - interval '1 minute' WHERE generation_id = ${gone}`,
    );
    await releaseProviderSlot(db.pool, lines[0]!);
    const next = await generation(a);
    expect(await take(next, batchLine(a, 'batch_a'))).toBe(true);
  });

  it('holds no one back once its generation ended or it moved on to another route', async () => {
    const [a, b] = accounts as [string, string];
    const lines = await Promise.all([1, 2, 3, 4].map(() => generation(a)));
    await tryAll(lines.map((id) => ({ id, claim: batchLine(a, 'batch_a') })));
    const canceled = await generation(b);
    const movedOn = await generation(b);
    expect(await take(canceled, interactive(b))).toBe(false);
    expect(await take(movedOn, interactive(b))).toBe(false);
    await db.pool.query(sql.unsafe`UPDATE generations SET status = 'failed' WHERE id = ${canceled}`);
    await releaseProviderSlot(db.pool, movedOn); // what submit does before it moves on
    await releaseProviderSlot(db.pool, lines[0]!);
    expect(await take(await generation(a), batchLine(a, 'batch_a'))).toBe(true);
  });

  it('takes a place it holds again as a no-op, and counts a place whose generation ended as free', async () => {
    const [a] = accounts as [string];
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => generation(a)));
    expect(await tryAll(ids.slice(0, 4).map((id) => ({ id, claim: interactive(a) })))).toHaveLength(4);
    expect(await take(ids[0]!, interactive(a))).toBe(true);
    expect(await take(ids[4]!, interactive(a))).toBe(false);
    await db.pool.query(sql.unsafe`UPDATE generations SET status = 'succeeded' WHERE id = ${ids[1]!}`);
    expect(await take(ids[4]!, interactive(a))).toBe(true);
  });
});
