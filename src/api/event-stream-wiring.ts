import type { Logger } from 'pino';
import { judgeKeyPrincipal } from '../auth/authenticator.js';
import type { Config } from '../config/service-config.js';
import { accountEventsAfter } from '../db/account-events.js';
import { findKeyPrincipalsById } from '../db/api-keys-repository.js';
import { generationEventsAfter } from '../db/generation-events.js';
import type { NotificationListener } from '../db/notifications.js';
import type { DatabasePool } from '../db/pool.js';
import { batchEventsAfter } from '../db/batch-events.js';
import { AccountEventStreams } from './account-event-streams.js';
import { BatchEventStreams } from './batch-event-streams.js';
import { GenerationEventStreams } from './generation-event-streams.js';
import { StreamSlots } from './stream-slots.js';

/** The event streams of an API process: the three kinds, and the places they share. */
export interface EventStreams {
  slots: StreamSlots;
  generations: GenerationEventStreams;
  accounts: AccountEventStreams;
  batches: BatchEventStreams;
  /** Streams open now, of every kind. */
  readonly size: number;
  /** Shutdown: every stream ends now (its client resumes on another process with Last-Event-ID). */
  close(): void;
}

/**
 * The event streams of an API process, woken by `generation_event`, `account_event` and `batch_event` on the
 * process's one listening connection (registered here, before the listener starts) and read again
 * after a reconnect; `auth_changed` looks the keys of the account's streams up again.
 */
export function openEventStreams(
  config: Config,
  pool: DatabasePool,
  listener: NotificationListener,
  logger: Logger,
): EventStreams {
  const log = logger.child({ component: 'event-streams' });
  const listening = () => listener.listening;
  const slots = new StreamSlots({
    perKey: config.EVENT_STREAMS_PER_KEY,
    perAccount: config.EVENT_STREAMS_PER_ACCOUNT,
    perProcess: config.EVENT_STREAMS_PER_PROCESS,
    keysThatMayCall: async (keyIds) =>
      new Set(
        (await findKeyPrincipalsById(pool, keyIds))
          .filter((principal) => judgeKeyPrincipal(principal).ok)
          .map((principal) => principal.key_id),
      ),
    listening,
    log,
  });
  const common = { slots, listening, log, keepAliveMs: config.EVENT_STREAM_KEEPALIVE_MS };
  const generations = new GenerationEventStreams({
    ...common,
    read: (id, afterSeq, limit) => generationEventsAfter(pool, id, afterSeq, { limit, withNewest: true }),
  });
  const accounts = new AccountEventStreams({
    ...common,
    read: (accountId, after, limit) => accountEventsAfter(pool, accountId, after, limit),
  });
  const batches = new BatchEventStreams({
    ...common,
    read: (id, afterSeq, limit) => batchEventsAfter(pool, id, afterSeq, { limit, withNewest: true }),
  });
  listener
    .on('generation_event', (id) => generations.changed(id))
    .on('account_event', (accountId) => accounts.changed(accountId))
    .on('batch_event', (id) => batches.changed(id))
    .on('auth_changed', (accountId) => slots.accountChanged(accountId))
    .onReconnect(() => {
      generations.recheckAll();
      accounts.recheckAll();
      batches.recheckAll();
      slots.recheckAll();
    });
  return {
    slots,
    generations,
    accounts,
    batches,
    get size() {
      return slots.size;
    },
    close() {
      slots.close();
      generations.close();
      accounts.close();
      batches.close();
    },
  };
}
