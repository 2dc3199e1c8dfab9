import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { generationEventsAfter } from '../db/generation-events.js';
import type { NotificationListener } from '../db/notifications.js';
import type { DatabasePool } from '../db/pool.js';
import { GenerationEventStreams } from './generation-event-streams.js';

/**
 * The event streams of an API process, woken by `generation_event` on the process's one listening
 * connection (registered here, before the listener starts) and read again after a reconnect.
 */
export function openEventStreams(
  config: Config,
  pool: DatabasePool,
  listener: NotificationListener,
  logger: Logger,
): GenerationEventStreams {
  const streams = new GenerationEventStreams({
    read: (id, afterSeq, limit) => generationEventsAfter(pool, id, afterSeq, { limit, withNewest: true }),
    listening: () => listener.listening,
    log: logger.child({ component: 'event-streams' }),
    perKey: config.EVENT_STREAMS_PER_KEY,
    perProcess: config.EVENT_STREAMS_PER_PROCESS,
    keepAliveMs: config.EVENT_STREAM_KEEPALIVE_MS,
  });
  listener.on('generation_event', (id) => streams.changed(id)).onReconnect(() => streams.recheckAll());
  return streams;
}
