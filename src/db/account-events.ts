import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { batchEventRow, toBatchEventRow, type BatchEventRow } from './batch-events.js';
import { generationEventRow, toGenerationEventRow, type GenerationEventRow } from './generation-events.js';

/**
 * An account's event log (migration 0023): every event of the account's generations, batches
 * (0026) and keys (0034), numbered by `position` in the order they committed (1, 2, 3… per account). A reader that
 * has seen position n resumes after n and misses nothing: positions are taken under the account's
 * head row lock, held until commit, so none below a visible one can still appear.
 */
export interface AccountEventRow {
  position: number;
  /** The event it orders: a generation's, a batch's, or a key's (0034). */
  event: GenerationEventRow | BatchEventRow | KeyEventRow;
}

/** A key's event (migration 0034: key.spend_limit_reached): the key's limit as it then stood. */
export interface KeyEventRow {
  seq: number;
  type: 'key.spend_limit_reached';
  created_at: string;
  key: Record<string, unknown>;
}

const keyEventRow = z.object({
  seq: z.number(),
  type: z.literal('key.spend_limit_reached'),
  created_at: z.string(),
  resource: z.record(z.string(), z.unknown()),
});

export type { BatchEventRow } from './batch-events.js';

type AnyEvent = AccountEventRow['event'];
export const isBatchEvent = (event: AnyEvent): event is BatchEventRow => 'batch' in event;
export const isKeyEvent = (event: AnyEvent): event is KeyEventRow => 'key' in event;

const accountEventRow = z.object({
  position: z.coerce.number(),
  subject: z.enum(['generation', 'batch', 'key']),
  seq: z.number(),
  type: z.string(),
  created_at: z.string(),
  resource: z.unknown(),
});

const columns = sql.fragment`a.position,
  CASE WHEN a.batch_id IS NOT NULL THEN 'batch' WHEN a.key_id IS NOT NULL THEN 'key' ELSE 'generation' END AS subject,
  coalesce(e.seq, b.seq, k.seq) AS seq, coalesce(e.type, b.type, k.type) AS type,
  coalesce(e.created_at, b.created_at, k.created_at) AS created_at,
  coalesce(e.resource, b.resource, k.resource) AS resource`;
const joined = sql.fragment`account_events a
  LEFT JOIN generation_events e ON e.generation_id = a.generation_id AND e.seq = a.generation_seq
  LEFT JOIN batch_events b ON b.batch_id = a.batch_id AND b.seq = a.batch_seq
  LEFT JOIN key_events k ON k.api_key_id = a.key_id AND k.seq = a.key_seq`;

function toRow(row: z.infer<typeof accountEventRow>): AccountEventRow {
  const { position, subject, ...event } = row;
  if (subject === 'generation')
    return { position, event: toGenerationEventRow(generationEventRow.parse(event)) };
  if (subject === 'key') {
    const { resource, ...keyEvent } = keyEventRow.parse(event);
    return { position, event: { ...keyEvent, key: resource } };
  }
  return { position, event: toBatchEventRow(batchEventRow.parse(event)) };
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
