import type { Generation } from '../types.js';

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** A plain text table: columns padded to their widest cell. */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

const mark: Record<string, string> = { succeeded: '✔', failed: '✘', rejected: '✘', queued: '…' };

/**
 * The status line: `gen_… queued 8s` while it runs, then
 * `gen_… queued 8s → ✔ succeeded 9s · 4 credits` (queued: the time last seen queued).
 */
export function statusLine(generation: Generation, queuedMs: number, elapsedMs: number): string {
  const queued = `${generation.id} queued ${Math.floor(queuedMs / 1000)}s`;
  if (generation.status === 'queued') return queued;
  const refund = generation.credits_refunded ? ' (refunded)' : '';
  const error = generation.error ? ` · ${generation.error.code}` : '';
  return `${queued} → ${mark[generation.status] ?? ''} ${generation.status} ${Math.floor(elapsedMs / 1000)}s · ${generation.credits} credits${refund}${error}`;
}
