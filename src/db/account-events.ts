import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { generationEventRow, toGenerationEventRow, type GenerationEventRow } from './generation-events.js';

/**
 * An account's event log (migration 0023): every event of the account's generations, numbered by
 * `position` in the order they committed (1, 2, 3… per account). A reader that has seen position n
 * resumes after n and misses nothing: positions are taken under the account's head row lock,
 * held until commit, so none below a visible one can still appear.
 */
export interface AccountEventRow {
  position: number;
  /** The event it orders (a generation's; batches' later). */
  event: GenerationEventRow;
}

const accountEventRow = generationEventRow.extend({ position: z.coerce.number() });

const columns = sql.fragment`a.position, e.seq, e.type, e.created_at, e.resource`;
const joined = sql.fragment`account_events a
  JOIN generation_events e ON e.generation_id = a.generation_id AND e.seq = a.generation_seq`;

function toRow(row: z.infer<typeof accountEventRow>): AccountEventRow {
  return { position: row.position, event: toGenerationEventRow(row) };
}

/** The account's events after `afterPosition`, oldest first, at most `limit`. */
export async function accountEventsAfter(
  db: CommonQueryMethods,
  accountId: string,
  afterPosition: number,
  limit: number,
): Promise<AccountEventRow[]> {
  const rows = await db.any(sql.type(accountEventRow)`
    SELECT ${columns} FROM ${joined}
    WHERE a.account_id = ${accountId} AND a.position > ${afterPosition}
    ORDER BY a.position LIMIT ${limit}`);
  return rows.map(toRow);
}

/** The account's newest `limit` events, oldest first. */
export async function latestAccountEvents(
  db: CommonQueryMethods,
  accountId: string,
  limit: number,
): Promise<AccountEventRow[]> {
  const rows = await db.any(sql.type(accountEventRow)`
    SELECT * FROM (SELECT ${columns} FROM ${joined}
      WHERE a.account_id = ${accountId} ORDER BY a.position DESC LIMIT ${limit}) newest
    ORDER BY position`);
  return rows.map(toRow);
}

const headRow = z.object({ last_position: z.coerce.number() });

/** The position of the account's newest committed event (0: none yet): where "from now on" starts. */
export async function accountEventHead(db: CommonQueryMethods, accountId: string): Promise<number> {
  const head = await db.maybeOneFirst(sql.type(headRow)`
    SELECT last_position FROM account_event_heads WHERE account_id = ${accountId}`);
  return head ?? 0;
}
