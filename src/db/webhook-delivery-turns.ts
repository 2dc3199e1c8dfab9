import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { webhookSubjectTables } from './webhook-subjects.js';

/**
 * An account's turns at delivering webhooks (migration 0024): at most `cap` attempts of one
 * account run at once, across workers; the others wait their turn, oldest first. Taken before an
 * attempt's POST, given back after it (a lost worker's turn lapses at its lease's end).
 */
export interface DeliveryTurnRequest {
  accountId: string;
  /** The delivery's subject: a generation's id, or a batch's. */
  generationId: string;
  /** The delivery asking (`<generation id>/<event seq>`, with `/redelivery` for one asked again). */
  holder: string;
  /** Attempts of the account at once (WEBHOOK_DELIVERIES_PER_ACCOUNT). */
  cap: number;
  /** How long a turn is held at most (an attempt's deadline, and some). */
  leaseMs: number;
}

const freeRow = z.object({ free: z.boolean() });
const waiterRow = z.object({ subject_id: z.string() });

/**
 * A waiter not seen for this long loses its place: its workflow is gone, or stopped asking (a run
 * that continued as new and waits out a retry's delay first). A waiting delivery asks every 30 s
 * (the workflow's turnWaitMs), so three asks missed.
 */
const waiterLapsesMs = 90_000;

/**
 * Takes a turn for `holder` when one is free and no older waiter of the account is owed it: true
 * (held until the lease ends or giveBackDeliveryTurn). Otherwise the holder waits in line (its
 * place kept from its first ask) and false is returned. A repeated ask of a turn held renews it.
 */
export async function takeDeliveryTurn(
  db: CommonQueryMethods,
  request: DeliveryTurnRequest,
): Promise<boolean> {
  const { accountId, holder, cap, leaseMs } = request;
  return db.transaction(async (tx) => {
    // One account's asks in turn: the count below stays true until this commits.
    await tx.query(
      sql.unsafe`SELECT pg_advisory_xact_lock(hashtextextended(${`webhook-turns:${accountId}`}, 0))`,
    );
    await tx.query(sql.unsafe`
      DELETE FROM webhook_delivery_turns WHERE account_id = ${accountId}
        AND (held_until < now() OR (held_until IS NULL AND seen_at < now() - make_interval(secs => ${waiterLapsesMs / 1000})))`);
    await tx.query(sql.unsafe`
      INSERT INTO webhook_delivery_turns (holder, account_id, ${webhookSubjectTables(request.generationId).key})
      VALUES (${holder}, ${accountId}, ${request.generationId})
      ON CONFLICT (holder) DO UPDATE SET seen_at = now()`);
    const { free } = await tx.one(sql.type(freeRow)`
      WITH mine AS (SELECT waiting_since, held_until FROM webhook_delivery_turns WHERE holder = ${holder})
      SELECT (SELECT held_until IS NOT NULL FROM mine) OR count(*) < ${cap} AS free
      FROM webhook_delivery_turns t, mine
      WHERE t.account_id = ${accountId} AND t.holder <> ${holder}
        AND (t.held_until IS NOT NULL
          OR (t.waiting_since, t.holder) < (mine.waiting_since, ${holder}))`);
    if (!free) return false;
    await tx.query(sql.unsafe`
      UPDATE webhook_delivery_turns SET held_until = now() + make_interval(secs => ${leaseMs / 1000})
      WHERE holder = ${holder}`);
    return true;
  });
}

/**
 * Gives back `holder`'s turn, and names the account's oldest waiters that may take a turn now
 * (their subjects, generations or batches, as many as turns are free): the caller wakes their deliveries.
 */
export async function giveBackDeliveryTurn(
  db: CommonQueryMethods,
  accountId: string,
  holder: string,
  cap: number,
): Promise<readonly string[]> {
  await db.query(sql.unsafe`DELETE FROM webhook_delivery_turns WHERE holder = ${holder}`);
  return db.anyFirst(sql.type(waiterRow)`
    SELECT coalesce(generation_id, batch_id) AS subject_id FROM webhook_delivery_turns
    WHERE account_id = ${accountId} AND held_until IS NULL
    ORDER BY waiting_since, holder
    LIMIT greatest(0, ${cap} - (SELECT count(*) FROM webhook_delivery_turns
      WHERE account_id = ${accountId} AND held_until > now()))`);
}
