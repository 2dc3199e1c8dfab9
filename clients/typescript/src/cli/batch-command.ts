import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '../client.js';
import { AbortedError, ApiError, ConnectionError } from '../core/errors.js';
import { newIdempotencyKey } from '../core/ids.js';
import { isRetryableStatus } from '../core/retry-policy.js';
import { downloadBatch, jsonlFile, type BatchDownload } from '../node/batch-download.js';
import type { Batch } from '../types.js';
import { BatchProgress, countsText } from './batch-progress.js';
import { BatchStillRunningError, exitCodes, UsageError } from './exit-codes.js';
import type { Io } from './run-command.js';

export interface BatchFlags {
  resume?: string | undefined;
  out?: string | undefined;
  window?: string | undefined;
  'idempotency-key'?: string | undefined;
  timeoutMs?: number | undefined;
  json: boolean;
}

/**
 * `gen batch FILE --out DIR` creates a batch from a JSONL file (streamed, one Idempotency-Key)
 * and follows it; `gen batch --resume ID --out DIR` follows one already made. Each finished
 * line's files land in DIR/<custom_id>/ as it finishes; files already there are kept, so a
 * resumed run downloads only what is missing. Ctrl-C stops following and leaves the batch running.
 */
export async function batchCommand(client: Client, file: string | undefined, flags: BatchFlags, io: Io) {
  if ((file === undefined) === (flags.resume === undefined))
    throw new UsageError('gen batch FILE --out DIR, or gen batch --resume ID --out DIR');
  let batch: Batch;
  if (file !== undefined) {
    const source = path.resolve(io.cwd, file);
    const found = await stat(source).catch(() => null);
    if (!found?.isFile()) throw new UsageError(`gen batch: no file ${file}`);
    const idempotencyKey = flags['idempotency-key'] ?? newIdempotencyKey();
    try {
      batch = await client.batches.create(
        { jsonl: jsonlFile(source), ...(flags.window ? { completion_window: flags.window } : {}) },
        { idempotencyKey },
      );
    } catch (error) {
      if (error instanceof ConnectionError || (error instanceof ApiError && isRetryableStatus(error.status)))
        io.stderr.write(
          `The batch may or may not have been made. Re-run the same command with this key: the same key and file never make a second batch.\n  --idempotency-key ${idempotencyKey}\n`,
        );
      throw error;
    }
    io.stderr.write(
      `${batch.id}: ${batch.request_counts.total} lines, ${batch.credits_quoted} credits at most, charged as each runs\n`,
    );
  } else batch = await client.batches.get(flags.resume!);

  const out = path.resolve(io.cwd, flags.out ?? path.join('batches', batch.id));
  const resume = `gen batch --resume ${batch.id} --out ${quoteArg(path.relative(io.cwd, out) || '.')}`;
  const progress = new BatchProgress(io.stderr, Boolean(io.stderr.isTTY));
  progress.update(batch);
  const controller = new AbortController();
  const onInterrupt = () => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onInterrupt);
  const timer =
    flags.timeoutMs === undefined
      ? undefined
      : setTimeout(() => controller.abort(new Error('timeout')), flags.timeoutMs);
  let done: BatchDownload;
  try {
    done = await downloadBatch(client, batch.id, out, {
      signal: controller.signal,
      onBatch: progress.update,
      onLine: (_line, saved) => (progress.files += saved.length),
      warn: () => undefined,
    });
  } catch (error) {
    progress.stop();
    if (!controller.signal.aborted) {
      io.stderr.write(`Resume with: ${resume}\n`);
      throw error;
    }
    const timedOut = (controller.signal.reason as Error).message === 'timeout';
    io.stderr.write(
      `${timedOut ? 'Still running at --timeout' : 'Stopped following'}; ${batch.id} goes on. Resume with: ${resume}\n`,
    );
    throw timedOut
      ? new BatchStillRunningError(`${batch.id} is still running.`)
      : new AbortedError(`Stopped following ${batch.id}.`, { cause: error });
  } finally {
    clearTimeout(timer);
    process.off('SIGINT', onInterrupt);
  }
  progress.stop();
  const summary = `${done.batch.id} ${done.batch.status}: ${countsText(done.batch)} · ${done.files.length} files in ${path.relative(io.cwd, out) || '.'}`;
  if (flags.json) {
    io.stderr.write(summary + '\n');
    io.stdout.write(JSON.stringify(done.batch, null, 2) + '\n');
  } else io.stdout.write(summary + '\n');
  return batchExitCode(done);
}

/**
 * 0 when every line succeeded; else the worst of its lines, as gen run's codes: 5 for failed
 * (and canceled or expired) lines, 4 for lines refused for credits, 6 for other refusals.
 */
export function batchExitCode(done: BatchDownload): number {
  const c = done.batch.request_counts;
  if (c.failed + c.canceled + c.expired > 0) return exitCodes.failed;
  const codes = done.withoutFiles.map((l) => l.generation?.error?.code ?? l.error?.code);
  if (codes.includes('insufficient_credits')) return exitCodes.credits;
  if (c.rejected + c.refused > 0) return exitCodes.rejected;
  return exitCodes.done;
}

const quoteArg = (arg: string) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`);
