import type { Logger } from 'pino';
import type { BatchLineAdmission } from '../activities/batch-line-admission.js';
import type { Config } from '../config/service-config.js';
import { NotificationListener } from '../db/notifications.js';
import type { DatabasePool } from '../db/pool.js';
import { ApiError, ValidationError } from '../vocabulary/errors.js';
import {
  admitGeneration,
  GenerationRefused,
  type AdmissionDeps,
} from '../generations/admission/admit-generation.js';
import { wireAdmission } from '../generations/admission/admission-wiring.js';
import { cancelGeneration } from '../generations/cancel-generation.js';
import { dnsUnavailableCode } from '../generations/admission/webhook-request.js';

/** The Idempotency-Key a batch's line is admitted with: a retried admission meets its generation. */
export const batchLineKey = (batchId: string, line: number) => `${batchId}:${line}`;

/** Admission's refusals of a line whose batch ended: debitRefusals.batchEnded. */
const batchEndedReasons = new Set(['batch_canceled', 'batch_expired']);

/**
 * A batch's lines through admission (admitGeneration, as a POST's), and a running line stopped
 * under the generation cancel rules (cancelGeneration). An invalid line (the catalog changed since
 * the batch was checked) is refused without being recorded as a generation; one whose webhook host
 * could not be resolved now (its name servers did not answer) is tried again later.
 */
export function batchLineAdmission(
  deps: AdmissionDeps,
  log: Pick<Logger, 'warn'>,
  changes?: LineChanges,
): BatchLineAdmission {
  return {
    ...(changes ? { waitForChange: (ids, timeoutMs) => changes.wait(ids, timeoutMs) } : {}),
    async admit({ accountId, apiKeyId, batchId, line }) {
      try {
        const admitted = await admitGeneration(
          deps,
          {
            principal: { accountId, keyId: apiKeyId },
            idempotencyKey: batchLineKey(batchId, line.line),
            body: line.request,
            recordInvalid: false,
            batch: { batchId, customId: line.customId },
          },
          log,
        );
        return { outcome: 'started', generationId: admitted.generationId };
      } catch (error) {
        // Its batch ended first (canceled, or past its window): the database refused the line and
        // wrote nothing; the slice ends it with the batch's other pending lines (migration 0036).
        if (error instanceof GenerationRefused && batchEndedReasons.has(error.reason))
          return { outcome: 'later' };
        // Refused at admission (credits, say): its generation is recorded, rejected, never charged.
        if (error instanceof GenerationRefused && error.outcome === 'rejected')
          return { outcome: 'started', generationId: error.generationId };
        if (error instanceof ValidationError) {
          // Only a webhook host that could not be resolved now: DNS is asked again at the next try.
          const found = error.extra.issues ?? [];
          if (found.length > 0 && found.every((i) => i.code === dnsUnavailableCode))
            return { outcome: 'later' };
          const issues = (error.extra.issues ?? []).map((i) => `${i.field || 'body'}: ${i.message}`);
          return { outcome: 'refused', error: { code: 'invalid_request', message: issues.join(' ') } };
        }
        if (error instanceof ApiError && error.code !== 'service_unavailable')
          return { outcome: 'refused', error: { code: error.code, message: error.message } };
        if (error instanceof ApiError) return { outcome: 'later' };
        throw error;
      }
    },
    async cancel(generationId, accountId) {
      await cancelGeneration(
        { db: deps.db, temporal: deps.temporal, timeoutMs: deps.admissionTimeoutMs },
        generationId,
        accountId,
      );
    },
  };
}

/**
 * Admission wired in the worker for its batch activities: the worker's own change feed (catalog,
 * provider states), Temporal client and storage, as the API's.
 */
export async function wireBatchAdmission(
  config: Config,
  pool: DatabasePool,
  logger: Logger,
): Promise<{ lines: BatchLineAdmission; close(): Promise<void> }> {
  const listener = new NotificationListener(
    config.DATABASE_URL,
    logger.child({ component: 'notifications' }),
  );
  const changes = new LineChanges();
  listener.on('generation_changed', (id) => changes.changed(id));
  const admission = wireAdmission(config, { pool, listener, logger });
  await listener.start();
  await admission.start();
  return {
    lines: batchLineAdmission(admission.deps, logger.child({ component: 'batches' }), changes),
    async close() {
      await listener.close();
      await admission.close();
    },
  };
}

/**
 * The batch slices waiting for one of their lines to change, woken by `generation_changed` (the
 * generation's id): a slice learns a line ended when it does, instead of at its next poll. A
 * notification missed (the listening connection dropped) costs only the poll interval.
 */
export class LineChanges {
  private readonly waiting = new Set<{ ids: ReadonlySet<string>; wake: () => void }>();

  /** Slices waiting now. */
  get size(): number {
    return this.waiting.size;
  }

  changed(id: string): void {
    for (const waiter of this.waiting) if (waiter.ids.has(id)) waiter.wake();
  }

  /** Resolves when one of `ids` changes, or after `timeoutMs`. */
  wait(ids: ReadonlySet<string>, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter = {
        ids,
        wake: () => {
          clearTimeout(timer);
          this.waiting.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, timeoutMs);
      this.waiting.add(waiter);
    });
  }
}
