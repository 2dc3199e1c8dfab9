import type { Generation } from '../types.js';
import { statusLine } from './format.js';

/**
 * What gen shows while it waits: on a terminal, one status line on stderr rewritten in place every
 * second; with --jsonl, one JSON line on stdout per status change; otherwise nothing.
 */
export class Progress {
  private current: Generation | undefined;
  private lastStatus: string | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private queuedMs = 0;
  private readonly startedAt = Date.now();

  constructor(
    private readonly out: {
      stderr: NodeJS.WriteStream | { write(s: string): unknown; isTTY?: boolean };
      stdout: { write(s: string): unknown };
    },
    private readonly mode: { line: boolean; jsonl: boolean },
  ) {
    if (mode.line) this.timer = setInterval(() => this.draw(), 1000);
  }

  update = (generation: Generation): void => {
    this.current = generation;
    if (this.mode.jsonl && generation.status !== this.lastStatus)
      this.out.stdout.write(JSON.stringify(generation) + '\n');
    this.lastStatus = generation.status;
    this.draw();
  };

  private draw(): void {
    if (!this.mode.line || !this.current) return;
    const elapsed = Date.now() - this.startedAt;
    if (this.current.status === 'queued') this.queuedMs = elapsed;
    this.out.stderr.write(`\r\x1b[2K${statusLine(this.current, this.queuedMs, elapsed)}`);
  }

  /** Stops redrawing; the line is drawn a last time and ended. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.mode.line && this.current) {
      this.draw();
      this.out.stderr.write('\n');
    }
  }
}
