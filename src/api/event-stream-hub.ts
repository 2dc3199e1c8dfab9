import type { Logger } from 'pino';
import { MissedNotifications } from '../db/missed-notifications.js';
import { OneReadInFlight } from './one-read-in-flight.js';
import type { StreamOwner, StreamSlots } from './stream-slots.js';

/** Where a stream writes: the response body. */
export interface StreamSink {
  write(text: string): unknown;
  end(): unknown;
}

interface Stream {
  /** The position of the last event it was sent. */
  after: number;
  sink: StreamSink;
  release: () => void;
}

/** Events read in one go; a longer log is read again from where this left off. */
const readBatch = 500;

export interface EventStreamHubOptions<Row> {
  /** Where every stream of the process takes its place (the caps, and the end of a revoked key's streams). */
  slots: StreamSlots;
  /** A subject's events after a position, oldest first, at most `limit` (and whatever `done` needs). */
  read: (subject: string, after: number, limit: number) => Promise<Row[]>;
  positionOf: (row: Row) => number;
  /** The event as one Server-Sent Events message. */
  message: (row: Row) => string;
  /** Whether a stream that has been sent everything up to `after` is finished, given the rows just read. */
  finished?: (rows: Row[], after: number) => boolean;
  listening: () => boolean;
  log: Logger;
  /** How often every open stream gets a comment line, so that idle proxies keep it. */
  keepAliveMs?: number;
}

/**
 * Open event streams of one kind in this process, by subject (a generation, an account), woken the
 * way waiters are: a notification (sent by the trigger that logs an event, on the one listening
 * connection per process) names the subject, and one read, shared by all its streams, fetches what
 * is new since the stream that is furthest behind. No stream polls. While notifications are not
 * arriving, the streamed subjects are read once a second instead.
 */
export class EventStreamHub<Row> {
  private readonly bySubject = new Map<string, Set<Stream>>();
  /** One read of a subject at a time, shared by its streams (again if it changed meanwhile). */
  private readonly reads = new OneReadInFlight({
    followed: (subject) => this.bySubject.has(subject),
    read: (subject, readAgain) => this.readNew(subject, readAgain),
  });
  private readonly missed = new MissedNotifications({
    listening: () => this.options.listening(),
    recheck: () => {
      for (const subject of this.bySubject.keys()) this.changed(subject);
    },
  });
  private readonly keepAlive: NodeJS.Timeout;

  constructor(private readonly options: EventStreamHubOptions<Row>) {
    // One timer for all streams, not one each: a thousand streams cost one wake-up per period.
    this.keepAlive = setInterval(() => {
      for (const streams of this.bySubject.values())
        for (const s of streams) s.sink.write(': keep-alive\n\n');
    }, options.keepAliveMs ?? 15_000);
    this.keepAlive.unref();
  }

  /** Streams of this kind open now. */
  get size(): number {
    let n = 0;
    for (const streams of this.bySubject.values()) n += streams.size;
    return n;
  }

  /**
   * Opens a stream of `subject`'s events after position `after` into `sink`: what is logged already
   * at once, then each new event as it is committed. The sink is ended when `finished` says so, when
   * the owner's key may no longer call, or at shutdown. Returns the function that detaches it (the
   * client went away), or null past a cap.
   */
  open(subject: string, owner: StreamOwner, after: number, sink: StreamSink): (() => void) | null {
    const stream: Stream = { after, sink, release: () => undefined };
    const release = this.options.slots.take(owner, () => this.finish(subject, stream));
    if (!release) return null;
    stream.release = release;
    let streams = this.bySubject.get(subject);
    if (!streams) this.bySubject.set(subject, (streams = new Set()));
    streams.add(stream);
    // Registered first, read second: an event committed after this read wakes the stream again.
    this.changed(subject);
    return () => this.detach(subject, stream);
  }

  private detach(subject: string, stream: Stream): void {
    stream.release();
    const streams = this.bySubject.get(subject);
    if (!streams?.delete(stream)) return;
    if (streams.size === 0) this.bySubject.delete(subject);
  }

  private finish(subject: string, stream: Stream): void {
    this.detach(subject, stream);
    stream.sink.end();
  }

  /** `subject` has a new event (its notification): its streams get what they have not seen. */
  changed(subject: string): void {
    this.reads.changed(subject);
  }

  /** What is new since the stream furthest behind, to each stream (read on while batches come full). */
  private readNew(subject: string, readAgain: () => void): Promise<void> {
    const streams = this.bySubject.get(subject)!;
    const from = Math.min(...[...streams].map((s) => s.after));
    const { positionOf } = this.options;
    return this.options.read(subject, from, readBatch).then(
      (rows) => {
        if (rows.filter((r) => positionOf(r) > from).length >= readBatch) readAgain();
        for (const stream of [...(this.bySubject.get(subject) ?? [])]) {
          // Opened while this read was in flight, behind where it began: these rows would skip
          // what lies between; the next read starts from it.
          if (stream.after < from) readAgain();
          else this.deliver(subject, stream, rows);
        }
      },
      (error: unknown) =>
        this.options.log.warn({ err: error, subject }, 'the events of an open stream could not be read'),
    );
  }

  private deliver(subject: string, stream: Stream, rows: Row[]): void {
    const unseen = rows.filter((r) => this.options.positionOf(r) > stream.after);
    if (unseen.length > 0) {
      stream.sink.write(unseen.map(this.options.message).join(''));
      stream.after = this.options.positionOf(unseen.at(-1)!);
    }
    if (this.options.finished?.(rows, stream.after)) this.finish(subject, stream);
  }

  /** Notifications may have been lost: every streamed subject is read again (once a second while away). */
  recheckAll(): void {
    this.missed.recheckAll();
  }

  /** Shutdown: every stream is ended now (its client resumes elsewhere with Last-Event-ID). */
  close(): void {
    clearInterval(this.keepAlive);
    this.missed.stop();
    for (const [subject, streams] of [...this.bySubject])
      for (const s of [...streams]) this.finish(subject, s);
  }
}
