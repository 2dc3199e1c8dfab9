import { setTimeout as delay } from 'node:timers/promises';
import type { CommonQueryMethods } from 'slonik';
import { recordUnanswered } from '../../db/debit-repository.js';
import { getGeneration, type GenerationRow } from '../../db/generation-reads.js';
import type { ApiError } from '../../vocabulary/errors.js';
import type { GenerationStart } from '../../workflows/generation-types.js';
import type { StartOutcome } from './start-outcome.js';

/**
 * What a request without an Idempotency-Key answers when its admission did not answer in time
 * (`failure`, a 503 from startGeneration). No retry can meet its generation, so the client will send
 * a new request, and this one must not be charged behind a 503. Either this request gives up first:
 * its generation is recorded refused `service_unavailable` (listed, named by the 503's request id),
 * and admission, finding that row, debits nothing and the run ends; or admission decided first, and
 * the request is answered with that decision after all: 202 with the debited generation (still
 * queued if its handover was slow), or admission's own refusal. When admission decided first but
 * its generation cannot be read within the three asks, the request is answered 202 with what is known
 * (`assumed`: the generation exists, as admission makes it when it accepts), never a 503 a client
 * would answer by sending it again and paying twice; its GET tells how admission decided. When
 * PostgreSQL cannot be written in three tries, `failure` stands: the one case left where the request
 * may yet be charged (should admission reach PostgreSQL later, within its horizon).
 */
export async function answerUnanswered(
  db: CommonQueryMethods,
  start: GenerationStart,
  failure: ApiError,
  assumed: GenerationRow,
): Promise<StartOutcome> {
  const { generationId, inputPrefix } = start;
  const error = {
    code: 'service_unavailable',
    message:
      'Admission did not complete in time, and this request was not charged. Send it again; with an Idempotency-Key a retry is always safe.',
  };
  const request = {
    id: generationId,
    accountId: start.accountId,
    apiKeyId: start.apiKeyId,
    workflowId: start.workflowId,
    model: start.model,
    mediaType: start.mediaType,
    fingerprint: start.fingerprint,
    createdAt: start.createdAt,
  };
  // Asked a few times: while neither row is written, admission may still debit once PostgreSQL
  // answers it again, and this request would then be charged behind its 503. Once one is written,
  // the generation admission wrote is read back in the asks left.
  let gaveUp: boolean | undefined;
  const row = await persistently(async () => {
    gaveUp ??= await recordUnanswered(db, request, error);
    return gaveUp ? null : getGeneration(db, start.accountId, generationId);
  });
  if (gaveUp === undefined) throw failure;
  // Its stored images (inputPrefix) are the caller's to delete: this request will never run.
  if (gaveUp) return { outcome: 'rejected', generationId, error, inputPrefix };
  if (!row) return { outcome: 'admitted', generationId, known: assumed };
  if (row.status === 'rejected' && row.error)
    return { outcome: 'rejected', generationId, error: row.error, inputPrefix };
  return { outcome: 'admitted', generationId, known: row };
}

/** `ask`'s answer, asked up to three times 200 ms apart; undefined when every ask failed. */
async function persistently<T>(ask: () => Promise<T>): Promise<T | undefined> {
  for (let asked = 1; ; asked++) {
    try {
      return await ask();
    } catch {
      if (asked === 3) return undefined;
      await delay(200);
    }
  }
}
