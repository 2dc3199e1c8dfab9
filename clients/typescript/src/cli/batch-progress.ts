import type { Batch } from '../types.js';

/** The lines of a batch that have ended, one way or another. */
export const endedLines = (c: Batch['request_counts']) =>
  c.succeeded + c.failed + c.rejected + c.refused + c.canceled + c.expired;

/** `12/40 · 10 succeeded · 1 failed · 4 running · 25 pending` (zero counts left out, but pending). */
export function countsText(batch: Batch): string {
  const c = batch.request_counts;
  const parts = [
    `${endedLines(c)}/${c.total}`,
    ...(
      [
        ['succeeded', c.succeeded],
        ['failed', c.failed],
        ['rejected', c.rejected],
        ['refused', c.refused],
        ['canceled', c.canceled],
        ['expired', c.expired],
        ['running', c.queued],
      ] as const
    )
      .filter(([, n]) => n > 0)
      .map(([name, n]) => `${n} ${name}`),
    `${c.pending} pending`,
  ];
  return parts.join(' · ');
}

function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * What `gen batch` shows while it follows a batch, on stderr: on a terminal, a bar with the counts
 * per status, the rate and the time left, redrawn in place every second; otherwise a plain line
 * each time the counts change.
 */
export class BatchProgress {
  private current: Batch | undefined;
  private shown = '';
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly startedAt = Date.now();
  private endedAtStart: number | undefined;
  files = 0;

  constructor(
    private readonly stderr: { write(s: string): unknown },
    private readonly tty: boolean,
  ) {
    if (tty) this.timer = setInterval(() => this.draw(), 1000);
  }

  update = (batch: Batch): void => {
    this.current = batch;
    this.endedAtStart ??= endedLines(batch.request_counts);
    this.draw();
  };

  /** The rate (lines ended per second since gen began following) and the time left, when known. */
  private pace(batch: Batch): string {
    const c = batch.request_counts;
    const ended = endedLines(c) - (this.endedAtStart ?? 0);
    const seconds = (Date.now() - this.startedAt) / 1000;
    if (ended <= 0 || seconds < 1) return `${duration(Date.now() - this.startedAt)}`;
    const rate = ended / seconds;
    const left = (c.total - endedLines(c)) / rate;
    return `${rate.toFixed(rate < 10 ? 1 : 0)} lines/s · ${left > 0 ? `~${duration(left * 1000)} left` : 'done'}`;
  }

  private draw(): void {
    const batch = this.current;
    if (!batch) return;
    if (this.tty) {
      const c = batch.request_counts;
      const width = 24;
      const filled = c.total === 0 ? width : Math.round((endedLines(c) / c.total) * width);
      const bar = `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}]`;
      this.stderr.write(
        `\r\x1b[2K${batch.id} ${bar} ${countsText(batch)} · ${this.pace(batch)} · ${this.files} files`,
      );
      return;
    }
    const line = `${batch.id} ${batch.status}: ${countsText(batch)}`;
    if (line !== this.shown) this.stderr.write(`${line}\n`);
    this.shown = line;
  }

  /** Stops redrawing; the bar is drawn a last time and ended. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty && this.current) {
      this.draw();
      this.stderr.write('\n');
    }
  }
}
