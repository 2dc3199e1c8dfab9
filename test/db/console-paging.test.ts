import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  cursorAfter,
  galleryPageQuery,
  listGallery,
  parsePageCursor,
  type PageCursor,
  requestLogPage,
  requestLogPageQuery,
} from '../../src/db/console-reads.js';
import { newId } from '../../src/vocabulary/ids.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The console's request log and gallery page newest first by (created_at, id), the order of their
 * tables' (account_id, created_at DESC) indexes, with a row id as the cursor: every row once, in
 * order, even when the cursor's row is deleted between two pages (an image expired, a log line pruned).
 */
describe('console paging', () => {
  let db: TestDatabase;
  let account: TestAccount;
  let other: TestAccount;
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 10 });
    other = await createPaidAccount(db.pool, { oneTime: 10 });
  });
  afterAll(async () => {
    await db?.drop();
  });

  const base = Date.parse('2026-11-01T00:00:00Z');
  /**
   * Times out of id order, with ties: row i at minute (i * 7) % 11, so ids and times disagree and
   * several rows share a time.
   */
  const minuteOf = (i: number) => new Date(base + ((i * 7) % 11) * 60_000).toISOString();
  const newestFirst = <T extends { id: number; created_at: string }>(rows: readonly T[]) =>
    [...rows]
      .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at) || b.id - a.id)
      .map((r) => r.id);

  /** Pages of `size` through `page`, deleting each page's last row (the cursor) before the next when `deleteCursor`. */
  async function walk(
    page: (before: PageCursor | null) => Promise<readonly { id: number; created_us: number }[]>,
    size: number,
    deleteCursor?: (id: number) => Promise<void>,
  ): Promise<number[]> {
    const seen: number[] = [];
    let before: PageCursor | null = null;
    for (;;) {
      const rows = await page(before);
      seen.push(...rows.slice(0, size).map((r) => r.id));
      if (rows.length <= size) return seen;
      const last = rows[size - 1]!;
      // Through the link's text, as the console's "older" link carries it.
      before = parsePageCursor(cursorAfter(last));
      await deleteCursor?.(last.id);
    }
  }

  it('the request log: every line once, newest first; a pruned cursor line does not lose the place', async () => {
    for (let i = 0; i < 40; i++)
      for (const owner of [account, other])
        await db.pool.query(sql.unsafe`
          INSERT INTO api_request_log (account_id, api_key_id, request_id, method, path, status_code, duration_ms, created_at)
          VALUES (${owner.accountId}, ${owner.keyId}, ${newId('req')}, 'GET', ${`/v1/r${i}`}, 200, 1, ${minuteOf(i)})`);
    const all = await db.pool.any(
      sql.type(z.object({ id: z.number(), created_at: z.string() }))`
        SELECT id, created_at::text FROM api_request_log WHERE account_id = ${account.accountId}`,
    );
    const page = (before: PageCursor | null) => requestLogPage(db.pool, account.accountId, 7 + 1, before);
    expect(await walk(page, 7)).toEqual(newestFirst(all));

    const deleted: number[] = [];
    const pruned = await walk(page, 7, async (id) => {
      deleted.push(id);
      await db.pool.query(sql.unsafe`DELETE FROM api_request_log WHERE id = ${id}`);
    });
    expect(deleted.length).toBeGreaterThan(3);
    // Each cursor line was shown (then deleted); nothing after it is skipped or shown twice.
    expect(pruned).toEqual(newestFirst(all));
  });

  it('the gallery: every image once, newest first; an image expired under the cursor does not lose the place', async () => {
    for (let i = 0; i < 30; i++) {
      const generationId = newId('gen');
      await db.pool.query(sql.unsafe`
        INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, created_at)
        VALUES (${generationId}, ${account.accountId}, ${account.keyId}, 'succeeded', 'lumen-lite', 'image', ${minuteOf(i)})`);
      await db.pool.query(sql.unsafe`
        INSERT INTO gallery_images (account_id, generation_id, url, width, height, created_at)
        VALUES (${account.accountId}, ${generationId}, ${`http://results.test/${i}.png`}, 64, 64, ${minuteOf(i)})`);
    }
    const all = await db.pool.any(
      sql.type(z.object({ id: z.number(), created_at: z.string() }))`
        SELECT id, created_at::text FROM gallery_images WHERE account_id = ${account.accountId}`,
    );
    const page = (before: PageCursor | null) =>
      listGallery(db.pool, { accountId: account.accountId, model: null, limit: 6 + 1, before });
    expect(await walk(page, 6)).toEqual(newestFirst(all));
    const expired = await walk(page, 6, async (id) => {
      await db.pool.query(sql.unsafe`DELETE FROM gallery_images WHERE id = ${id}`);
    });
    expect(expired).toEqual(newestFirst(all));
  });

  it('both walk their account’s (account_id, created_at DESC) index in order, without sorting the account’s rows', async () => {
    /** The plan of one of the console's page queries, with sequential scans off (the tables here are small). */
    const plan = (query: ReturnType<typeof requestLogPageQuery> | ReturnType<typeof galleryPageQuery>) =>
      db.pool.transaction(async (tx) => {
        await tx.query(sql.unsafe`SET LOCAL enable_seqscan = off`);
        const rows = await tx.query({ ...sql.unsafe``, sql: `EXPLAIN ${query.sql}`, values: query.values });
        return rows.rows.map((row) => Object.values(row as Record<string, string>)[0]).join('\n');
      });
    const cursor = { createdUs: Date.parse('2026-11-01T00:05:00Z') * 1000, id: 50 };
    const log = await plan(requestLogPageQuery(account.accountId, 51, cursor));
    expect(log).toContain('api_request_log_account');
    expect(log).not.toMatch(/-> {2}Sort /);
    const gallery = await plan(
      galleryPageQuery({ accountId: account.accountId, model: null, limit: 25, before: cursor }),
    );
    expect(gallery).toContain('gallery_images_account');
    expect(gallery).not.toMatch(/-> {2}Sort /);
  });
});
