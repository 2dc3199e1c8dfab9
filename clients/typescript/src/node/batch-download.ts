import { createReadStream } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { AbortedError } from '../core/errors.js';
import { abortableSleep } from '../core/signals.js';
import type { Client } from '../client.js';
import type { JsonlSource } from '../resources/batches.js';
import { isBatchTerminal, type Batch, type BatchResultLine } from '../types.js';
import { downloadAll, type DownloadOptions, type SavedFile } from './download.js';

/**
 * A JSONL file as a batch's body (`client.batches.create({ jsonl: jsonlFile('requests.jsonl') })`):
 * streamed from disk as it is sent, opened afresh for each retry, never read whole into memory.
 */
export function jsonlFile(file: string): JsonlSource {
  return () => Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
}

/**
 * The folder of a line's files: its custom_id, percent-encoded where it is not a plain file name
 * (`/`, `\`, `%`, `:`, control characters…), so that no custom_id leaves `dir` or names another's folder.
 */
export function folderOf(customId: string): string {
  if (customId === '.' || customId === '..') return customId.replaceAll('.', '%2E');
  return encodeURIComponent(customId).replaceAll('%20', ' ');
}

export interface BatchDownloadOptions extends Omit<DownloadOptions, 'to' | 'expiresAt' | 'skipExisting'> {
  /** Keep reading until the batch ends, downloading lines as they finish (default true). */
  follow?: boolean;
  /** Told each line once, with the files it saved (none for a line that did not succeed). */
  onLine?: (line: BatchResultLine, saved: SavedFile[]) => void;
  /** Told each new state of the batch while following. */
  onBatch?: (batch: Batch) => void;
  /** The first pause between reads while following (default 1 s, growing to 15 s while nothing ends). */
  pollIntervalMs?: number;
}

export interface BatchDownload {
  batch: Batch;
  /** Lines seen (each told once to onLine). */
  lines: number;
  /** Files written or already there. */
  files: SavedFile[];
  /** Lines that ended without images (failed, rejected, refused, canceled, expired). */
  withoutFiles: BatchResultLine[];
}

/**
 * Every image of a batch into `dir/<custom_id>/`, as its lines finish. Files already there are
 * kept (a resumed download fetches only what is missing). With `follow` (the default) it returns
 * once the batch has ended and every line is read; without, after one pass over what has finished.
 */
export async function downloadBatch(
  client: Pick<Client, 'batches'>,
  batchId: string,
  dir: string,
  options: BatchDownloadOptions = {},
): Promise<BatchDownload> {
  const { follow = true, onLine, onBatch, pollIntervalMs = 1000, ...download } = options;
  const seen = new Set<number>();
  const files: SavedFile[] = [];
  const withoutFiles: BatchResultLine[] = [];
  // Every line up to `read` has been seen: a read starts after it (lines end out of order).
  let read = -1;
  let pause = pollIntervalMs;
  let last = '';
  for (;;) {
    const batch = await client.batches.get(batchId, { signal: options.signal });
    const now = JSON.stringify(batch);
    if (now !== last) onBatch?.(batch);
    last = now;
    let fresh = 0;
    for await (const line of client.batches.results(batchId, { after: read, signal: options.signal })) {
      if (seen.has(line.line)) continue;
      fresh++;
      const saved =
        line.generation?.status === 'succeeded'
          ? await downloadAll(line.generation, path.join(dir, folderOf(line.custom_id)), {
              ...download,
              skipExisting: true,
            })
          : [];
      if (saved.length === 0) withoutFiles.push(line);
      files.push(...saved);
      seen.add(line.line);
      while (seen.has(read + 1)) read++;
      onLine?.(line, saved);
    }
    // Ended before the read, with no line still running: every line was in it.
    const ended =
      isBatchTerminal(batch) &&
      (seen.size >= batch.request_counts.total || batch.request_counts.queued === 0);
    if (!follow || ended) return { batch, lines: seen.size, files, withoutFiles };
    pause = fresh > 0 ? pollIntervalMs : Math.min(15_000, pause * 1.5);
    await abortableSleep(pause, options.signal).catch((cause: unknown) => {
      throw new AbortedError(`Stopped downloading batch ${batchId}; it goes on.`, { cause });
    });
  }
}
