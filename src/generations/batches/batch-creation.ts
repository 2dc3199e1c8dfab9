import { createHash } from 'node:crypto';
import type { DatabasePool } from '../../db/pool.js';
import { recordBatchEvent } from '../../db/batch-events.js';
import { insertBatchLines } from '../../db/batch-lines.js';
import { batchEventResource } from '../../db/batch-view.js';
import {
  batchCounts,
  batchOfKey,
  finishInsert,
  getBatch,
  insertBatch,
  type BatchRow,
} from '../../db/batches.js';
import { getBalance } from '../../db/credits-repository.js';
import { ApiError, ValidationError, type ValidationIssue } from '../../vocabulary/errors.js';
import { newId } from '../../vocabulary/ids.js';
import { MAX_ISSUES } from '../../validation/storable-text.js';
import { checkBatchCaps, type BatchCaps } from './batch-caps.js';
import { checkBatchEnvelope, customIdIssue, type BatchEnvelope } from './batch-envelope.js';
import { StagedLines } from './batch-staging.js';
import { startBatchOrRefuse, type BatchStartDeps } from './batch-start.js';
import { canonicalJson } from '../admission/fingerprint.js';
import { checkIdempotencyKey, checkRequest, type RequestCheckDeps } from '../admission/generation-request.js';
import type { WebhookSettings } from '../admission/webhook-request.js';

/** What creating a batch reads and acts through (the API's admission deps and pool). */
export interface BatchCreationDeps extends RequestCheckDeps, BatchStartDeps {
  /** How webhooks are checked, and the retry schedule a batch's subscription keeps. */
  webhooks?: WebhookSettings;
  pool: DatabasePool;
  maxLines: number;
  linesInFlight: number;
  /** History events after which a batch's workflow continues as new (its default when absent). */
  historyEventsPerRun?: number;
  /** What an account's open batches may hold together (absent: no caps). */
  caps?: BatchCaps;
}

/** A request for a batch as the route received it: the envelope's fields, and its lines as they arrive. */
export interface BatchRequest {
  principal: { accountId: string; keyId: string };
  idempotencyKey: string | string[] | undefined;
  /**
   * The envelope's fields (completion_window, metadata, …), whole once the lines are read: the
   * JSON form's may stand after `requests`. Checked then, by checkEnvelope.
   */
  envelope: () => Record<string, unknown>;
  /** Each line as parsed (one JSON value each), in input order; read once, never held whole. */
  lines: AsyncIterable<unknown> | Iterable<unknown>;
  /** Where a line's fields are named in issues: `requests[3]` for the JSON form, `line 4` for JSONL. */
  lineField: (index: number) => string;
}

const chunkSize = 500;

/** A JSONL line that is not JSON, as the route hands it on: refused as such, named by its index. */
export class NotJsonLine {
  constructor(readonly text: string) {}
}

/** The batch's workflow: from the key and Idempotency-Key when there is one (a retry meets it), else its own. */
export function batchWorkflowId(keyId: string, key: string | null, batchId: string): string {
  if (key === null) return `batch-${batchId}`;
  return `batch-${createHash('sha256').update(`${keyId}\u0000${key}`).digest('hex').slice(0, 40)}`;
}

/**
 * Creates a batch: every line checked as admission checks a POST's body (checkRequest) and staged
 * (StagedLines) as the body arrives, then the envelope (whole only once the lines are read), all
 * before any database connection is taken, so that a slow upload holds nothing shared. A bad line
 * or envelope, a duplicate custom_id, a quoted total above the balance, too many lines or a body
 * past its limit refuses it with nothing written; then one short transaction writes the batch and
 * its staged lines, and its workflow is started.
 * The same Idempotency-Key with the same lines answers the batch it made (`created` false); with
 * others, 409. Nothing is charged: each line is, when its workflow admits it.
 */
export async function createBatch(
  deps: BatchCreationDeps,
  request: BatchRequest,
): Promise<{ batch: BatchRow; created: boolean }> {
  const keyCheck = checkIdempotencyKey(request.idempotencyKey);
  if (!keyCheck.ok) throw new ValidationError([keyCheck.issue]);
  const key = keyCheck.key;
  const { accountId, keyId } = request.principal;
  const id = newId('batch');
  const workflowId = batchWorkflowId(keyId, key, id);
  const hash = createHash('sha256');
  const createdAt = Date.now();
  // A retry of a batch the key made: its lines are only hashed, to be matched with the first's.
  const existing = key !== null && (await batchOfKey(deps.pool, keyId, key)) !== null;
  const staged = existing ? null : new StagedLines();
  try {
    const read = await readLines(deps, request, hash, staged);
    const envelope = await checkBatchEnvelope(request.envelope(), deps.webhooks);
    if (!envelope.ok) throw new ValidationError([...envelope.issues, ...read.issues].slice(0, MAX_ISSUES));
    hash.update(canonicalJson(envelopeOf(envelope.envelope, envelope.webhook)));
    const fingerprint = hash.digest('hex');
    if (!staged) return await answerExisting(deps, keyId, key!, fingerprint);
    if (read.issues.length > 0) throw new ValidationError(read.issues.slice(0, MAX_ISSUES));
    const balance = await getBalance(deps.pool, accountId);
    if (read.credits > balance.credits)
      throw new ApiError(
        'insufficient_credits',
        `The batch is quoted at ${read.credits} credits; the balance is ${balance.credits}.`,
      );
    const inserted = await deps.pool.transaction(async (tx) => {
      // False: the same key's batch was written meanwhile (a concurrent retry): it is answered.
      if (!(await insertBatch(tx, { id, accountId, apiKeyId: keyId, workflowId, idempotencyKey: key })))
        return false;
      if (deps.caps) await checkBatchCaps(tx, { accountId, batchId: id, lines: read.count }, deps.caps);
      for await (const chunk of staged.chunks(chunkSize)) await insertBatchLines(tx, id, chunk);
      await finishInsert(tx, id, {
        fingerprint,
        lineCount: read.count,
        quotedCredits: read.credits,
        completionWindow: envelope.envelope.completionWindow,
        expiresAt: new Date(createdAt + envelope.envelope.windowMs),
        webhook: envelope.webhook,
        metadata: envelope.envelope.metadata,
      });
      const batch = (await getBatch(tx, accountId, id))!;
      await recordBatchEvent(
        tx,
        id,
        'batch.created',
        batchEventResource(batch, await batchCounts(tx, batch)),
      );
      return true;
    });
    if (!inserted) return await answerExisting(deps, keyId, key!, fingerprint);
  } finally {
    await staged?.discard();
  }
  const batch = (await getBatch(deps.pool, accountId, id))!;
  await startBatchOrRefuse(deps, batch, runOf(deps), key !== null);
  return { batch, created: true };
}

/**
 * A batch's quote: its lines checked exactly as a create checks them (the same 400), and their
 * total at each line's price now. Nothing is written, started or charged.
 */
export async function quoteBatch(
  deps: Omit<BatchCreationDeps, 'pool' | 'temporal' | 'taskQueue' | 'linesInFlight' | 'historyEventsPerRun'>,
  request: Omit<BatchRequest, 'principal' | 'idempotencyKey'>,
): Promise<{ lines: number; credits: number }> {
  const read = await readLines(deps, request, createHash('sha256'), 'check');
  const envelope = await checkBatchEnvelope(request.envelope(), deps.webhooks);
  const issues = [...(envelope.ok ? [] : envelope.issues), ...read.issues];
  if (issues.length > 0) throw new ValidationError(issues.slice(0, MAX_ISSUES));
  return { lines: read.count, credits: read.credits };
}

/** The settings a batch's workflow is started with. */
const runOf = (deps: BatchCreationDeps) => ({
  linesInFlight: deps.linesInFlight,
  ...(deps.historyEventsPerRun !== undefined && { historyEventsPerRun: deps.historyEventsPerRun }),
});

/** The batch the key made, for a retry with the same lines; 409 for other lines. */
async function answerExisting(
  deps: BatchCreationDeps,
  keyId: string,
  key: string,
  fingerprint: string,
): Promise<{ batch: BatchRow; created: boolean }> {
  const batch = await batchOfKey(deps.pool, keyId, key);
  if (!batch) throw new ApiError('service_unavailable', 'The batch was not decided; send it again.');
  if (batch.fingerprint !== fingerprint)
    throw new ApiError(
      'idempotency_conflict',
      'This Idempotency-Key was used with a different batch. Use a new key for a new batch.',
    );
  // A first request whose workflow did not start (Temporal away) is started by its retry, canceled
  // meanwhile or not (a start that did happen is met: the workflow id is the key's).
  if (batch.started_at === null && (batch.status === 'validating' || batch.status === 'canceling'))
    await startBatchOrRefuse(deps, batch, runOf(deps), true);
  return { batch, created: false };
}

interface LinesRead {
  count: number;
  credits: number;
  issues: ValidationIssue[];
}

/**
 * Reads and hashes every line; unless `stage` is null (a retry: hashed only), checks each, and
 * stages the good ones while none has failed (`check`: checked only, as a quote does).
 */
async function readLines(
  deps: RequestCheckDeps & { maxLines: number },
  request: Pick<BatchRequest, 'lines' | 'lineField'>,
  hash: ReturnType<typeof createHash>,
  stage: StagedLines | 'check' | null,
): Promise<LinesRead> {
  const read: LinesRead = { count: 0, credits: 0, issues: [] };
  const seen = new Set<string>();
  for await (const value of request.lines) {
    const index = read.count++;
    hash.update(value instanceof NotJsonLine ? value.text : canonicalJson(value));
    hash.update('\n');
    if (stage === null) continue;
    const name = request.lineField(index);
    if (value instanceof NotJsonLine) {
      if (read.issues.length < MAX_ISSUES)
        read.issues.push({ field: name, code: 'invalid_json', message: `Line ${index} is not JSON.` });
      continue;
    }
    if (index === deps.maxLines)
      read.issues.push({
        field: name,
        code: 'too_big',
        message: `A batch holds at most ${deps.maxLines} lines.`,
      });
    if (index >= deps.maxLines) continue;
    const checked = await checkLine(deps, value, seen);
    if (!checked.ok) {
      const label = checked.customId === null ? '' : ` (custom_id ${JSON.stringify(checked.customId)})`;
      for (const issue of checked.issues)
        if (read.issues.length < MAX_ISSUES)
          read.issues.push({
            ...issue,
            field: issue.field ? `${name}.${issue.field}` : name,
            message: `Line ${index}${label}: ${issue.message}`,
          });
      continue;
    }
    read.credits += checked.credits;
    if (read.issues.length > 0 || stage === 'check') continue;
    await stage.add({ line: index, customId: checked.customId, requestJson: JSON.stringify(checked.body) });
  }
  if (read.count === 0)
    read.issues.push({ field: 'requests', code: 'too_small', message: 'A batch needs at least one line.' });
  return read;
}

type LineCheck =
  | { ok: true; customId: string; body: Record<string, unknown>; credits: number }
  | { ok: false; customId: string | null; issues: ValidationIssue[] };

async function checkLine(deps: RequestCheckDeps, value: unknown, seen: Set<string>): Promise<LineCheck> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return {
      ok: false,
      customId: null,
      issues: [{ field: '', code: 'invalid_type', message: 'Expected an object.' }],
    };
  const { custom_id: customId, ...body } = value as Record<string, unknown>;
  const idIssue = customIdIssue(customId);
  const named = typeof customId === 'string' ? customId : null;
  const issues = idIssue ? [idIssue] : [];
  if (!idIssue && seen.has(customId as string))
    issues.push({
      field: 'custom_id',
      code: 'duplicate',
      message: 'Another line of this batch has this custom_id.',
    });
  else if (!idIssue) seen.add(customId as string);
  const checked = await checkRequest(deps, body);
  if (!checked.ok) issues.push(...checked.issues);
  if (issues.length > 0 || !checked.ok) return { ok: false, customId: named, issues };
  return { ok: true, customId: customId as string, body, credits: checked.credits };
}

function envelopeOf(envelope: BatchEnvelope, webhook: { url: string; events: string[] } | null) {
  // Without a webhook, the envelope hashes as before webhooks were taken (its key's retries match).
  return {
    completion_window: envelope.completionWindow,
    metadata: envelope.metadata,
    ...(webhook && { webhook }),
  };
}
