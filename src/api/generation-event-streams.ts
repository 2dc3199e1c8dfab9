import type { Logger } from 'pino';
import { MissedNotifications } from '../db/missed-notifications.js';
import type { GenerationEventRow } from '../db/generation-events.js';
import { isTerminal } from './conditional-reads.js';
import { sseMessage } from './generation-event-view.js';

/** At most this many event streams are open at once per API key, and per API process (as waiters). */
export const streamsPerKey = 1_000;
export const streamsPerProcess = 10_000;

/** Where a stream writes: the response body. */
export interface StreamSink {
  write(text: string): unknown;
  end(): unknown;
}

/**
 * Reads a generation's events after an event number, oldest first, at most `limit`, and its
 * newest event in any case (generationEventsAfter with `withNewest`).
 */
type EventReader = (generationId: string, afterSeq: number, limit: number) => Promise<GenerationEventRow[]>;

interface Stream {
  keyId: string;
  lastSeq: number;
  sink: StreamSink;
}

/** Events read in one go; a longer log is read again from where this left off. */
const readBatch = 500;

/**
 * The open `GET /v1/generations/{id}/events` streams of this process, woken the way waiters are:
 * the `generation_event` notification (the trigger that writes an event sends it, on the one
 * listening connection per process) names the generation, and one read, shared by all its streams,
 * fetches what is new since the stream that is furthest behind. No stream polls. While
 * notifications are not arriving, the streamed generations are read once a second instead.
 */
export class GenerationEventStreams {
  private readonly byGeneration = new Map<string, Set<Stream>>();
  private readonly perKey = new Map<string, number>();
  private count = 0;
  private closing = false;
  private readonly reading = new Map<string, { again: boolean }>();
  private readonly missed = new MissedNotifications({
    listening: () => this.options.listening(),
    recheck: () => {
      for (const id of this.byGeneration.keys()) this.changed(id);
    },
  });
  private readonly keepAlive: NodeJS.Timeout;

  constructor(
    private readonly options: {
      read: EventReader;
      listening: () => boolean;
      log: Logger;
      perKey?: number;
      perProcess?: number;
      /** How often every open stream gets a comment line, so that idle proxies keep it. */
      keepAliveMs?: number;
    },
  ) {
    // One timer for all streams, not one each: a thousand streams cost one wake-up per period.
    this.keepAlive = setInterval(() => {
      for (const streams of this.byGeneration.values())
        for (const s of streams) s.sink.write(': keep-alive\n\n');
    }, options.keepAliveMs ?? 15_000);
    this.keepAlive.unref();
  }

  /** Streams open now. */
  get size(): number {
    return this.count;
  }

  /** Whether one more stream for this key would be within the caps (checked before any work). */
  hasRoomFor(keyId: string): boolean {
    return (
      !this.closing &&
      (this.perKey.get(keyId) ?? 0) < (this.options.perKey ?? streamsPerKey) &&
      this.count < (this.options.perProcess ?? streamsPerProcess)
    );
  }

  /**
   * Opens a stream of generation `generationId`'s events after `lastSeq` into `sink`: what is
   * logged already at once, then each new event as it is committed; the sink is ended after an
   * event that leaves the generation terminal, or at shutdown. Returns the function that detaches
   * it (the client went away), or null past a cap.
   */
  open(generationId: string, keyId: string, lastSeq: number, sink: StreamSink): (() => void) | null {
    if (!this.hasRoomFor(keyId)) return null;
    const stream: Stream = { keyId, lastSeq, sink };
    let streams = this.byGeneration.get(generationId);
    if (!streams) this.byGeneration.set(generationId, (streams = new Set()));
    streams.add(stream);
    this.perKey.set(keyId, (this.perKey.get(keyId) ?? 0) + 1);
    this.count += 1;
    // Registered first, read second: an event committed after this read wakes the stream again.
    this.changed(generationId);
    return () => this.detach(generationId, stream);
  }

  private detach(generationId: string, stream: Stream): void {
    const streams = this.byGeneration.get(generationId);
    if (!streams?.delete(stream)) return;
    if (streams.size === 0) this.byGeneration.delete(generationId);
    const left = (this.perKey.get(stream.keyId) ?? 1) - 1;
    if (left > 0) this.perKey.set(stream.keyId, left);
    else this.perKey.delete(stream.keyId);
    this.count -= 1;
  }

  private finish(generationId: string, stream: Stream): void {
    this.detach(generationId, stream);
    stream.sink.end();
  }

  /** Generation `id` has a new event (its notification): its streams get what they have not seen. */
  changed(id: string): void {
    const streams = this.byGeneration.get(id);
    if (!streams) return;
    const inFlight = this.reading.get(id);
    if (inFlight) {
      inFlight.again = true;
      return;
    }
    const state = { again: false };
    this.reading.set(id, state);
    const from = Math.min(...[...streams].map((s) => s.lastSeq));
    void this.options
      .read(id, from, readBatch)
      .then(
        (events) => {
          if (events.filter((e) => e.seq > from).length >= readBatch) state.again = true;
          for (const stream of [...(this.byGeneration.get(id) ?? [])]) this.deliver(id, stream, events);
        },
        (error: unknown) =>
          this.options.log.warn({ err: error, generation_id: id }, 'a streamed generation could not be read'),
      )
      .finally(() => {
        this.reading.delete(id);
        if (state.again) this.changed(id);
      });
  }

  private deliver(generationId: string, stream: Stream, events: GenerationEventRow[]): void {
    const unseen = events.filter((e) => e.seq > stream.lastSeq);
    if (unseen.length > 0) {
      stream.sink.write(unseen.map(sseMessage).join(''));
      stream.lastSeq = unseen.at(-1)!.seq;
    }
    // The stream has the newest event, and it leaves the generation terminal: nothing more is expected.
    const newest = events.at(-1);
    if (newest && stream.lastSeq >= newest.seq && isTerminal(newest.generation.status))
      this.finish(generationId, stream);
  }

  /** Notifications may have been lost: every streamed generation is read again (once a second while away). */
  recheckAll(): void {
    this.missed.recheckAll();
  }

  /** Shutdown: every stream is ended now (its client resumes elsewhere with Last-Event-ID); none opens. */
  close(): void {
    this.closing = true;
    clearInterval(this.keepAlive);
    this.missed.stop();
    for (const [id, streams] of [...this.byGeneration]) for (const s of [...streams]) this.finish(id, s);
  }
}
