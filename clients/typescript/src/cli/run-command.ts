import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '../client.js';
import {
  AbortedError,
  ApiError,
  ConnectionError,
  GenerationFailedError,
  GenerationRejectedError,
  NotFoundError,
  RouteNotAvailableError,
} from '../core/errors.js';
import { newIdempotencyKey } from '../core/ids.js';
import { isRetryableStatus } from '../core/retry-policy.js';
import { downloadAll } from '../node/download.js';
import { priceOf } from '../pricing.js';
import type { Generation } from '../types.js';
import { TooDearError, UsageError } from './exit-codes.js';
import { formatBytes } from './format.js';
import type { NumericOptions } from './options.js';
import { buildBody } from './params.js';
import { Progress } from './progress.js';

export interface Io {
  stdout: { write(s: string): unknown; isTTY?: boolean };
  stderr: { write(s: string): unknown; isTTY?: boolean };
  stdin: NodeJS.ReadableStream;
  cwd: string;
}

export interface RunFlags extends NumericOptions {
  param: string[];
  'params-json'?: string | undefined;
  'idempotency-key'?: string | undefined;
  'no-wait'?: boolean | undefined;
  'no-download'?: boolean | undefined;
  output?: string | undefined;
  json: boolean;
  jsonl: boolean;
}

async function readStdin(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += String(chunk);
  return text;
}

async function paramsJson(source: string | undefined, io: Io): Promise<Record<string, unknown>> {
  if (source === undefined) return {};
  const text =
    source === '-' ? await readStdin(io.stdin) : await readFile(path.resolve(io.cwd, source), 'utf8');
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UsageError('--params-json: expected a JSON object');
  return value as Record<string, unknown>;
}

/** The price of the body and the balance, from the quote route or (older APIs) the live catalog. */
async function quote(client: Client, body: Record<string, unknown>, model: Parameters<typeof priceOf>[0]) {
  try {
    const q = await client.generations.quote(body as never);
    return { credits: q.credits, balance: q.balance.total };
  } catch (error) {
    if (!(error instanceof RouteNotAvailableError)) throw error;
    return { credits: priceOf(model, body), balance: (await client.credits.get()).credits };
  }
}

/** `gen run MODEL PROMPT`: quote, create (one key), wait with progress, download. */
export async function runCommand(
  client: Client,
  model: string,
  prompt: string,
  flags: RunFlags,
  io: Io,
): Promise<number> {
  const entry = await client.models.get(model).catch((error: unknown) => {
    if (error instanceof NotFoundError) throw new UsageError(`No model ${model}: see gen models.`);
    throw error;
  });
  const body = await buildBody(
    entry,
    prompt,
    flags.param,
    await paramsJson(flags['params-json'], io),
    io.cwd,
  );
  const price = await quote(client, body, entry);
  io.stderr.write(`${entry.id}: ${price.credits ?? '?'} credits · balance ${price.balance} credits\n`);
  const max = flags.maxCredits;
  if (max !== undefined && (price.credits === null || price.credits > max))
    throw new TooDearError(
      `${price.credits ?? 'an unknown number of'} credits is more than --max-credits ${max}; nothing was sent.`,
    );

  const idempotencyKey = flags['idempotency-key'] ?? newIdempotencyKey();
  let created: Generation;
  try {
    created = await client.generations.create(body as never, { idempotencyKey });
  } catch (error) {
    const advice = retryAdvice(error);
    if (advice)
      io.stderr.write(
        `${advice} Re-run the same command with this key: the same key and body never make or charge a second generation.\n  --idempotency-key ${idempotencyKey}\n`,
      );
    throw error;
  }
  if (flags['no-wait']) {
    io.stdout.write(created.id + '\n');
    return 0;
  }
  return waitAndSave(client, created, flags, io);
}

/**
 * What to say when a create failed in a way that a retry with the same key puts right: no answer
 * (the request may have been processed), or a 408/429/5xx that outlasted the client's retries.
 * Undefined for an answer that a retry would only repeat (400, 402, 409…).
 */
function retryAdvice(error: unknown): string | undefined {
  if (error instanceof ConnectionError) return 'The request may or may not have reached the API.';
  if (error instanceof ApiError && isRetryableStatus(error.status))
    return `The API answered ${error.status} after every retry.`;
  return undefined;
}

/** Waits with the status line (or JSON lines), then prints or downloads the result. Shared by run and wait. */
export async function waitAndSave(
  client: Client,
  start: string | Generation,
  flags: RunFlags,
  io: Io,
): Promise<number> {
  const id = typeof start === 'string' ? start : start.id;
  const controller = new AbortController();
  const onInterrupt = () => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onInterrupt);
  const progress = new Progress(io, {
    line: Boolean(io.stderr.isTTY) && !flags.jsonl,
    jsonl: flags.jsonl,
  });
  let done: Generation;
  try {
    done = await client.generations.wait(start, {
      signal: controller.signal,
      onUpdate: progress.update,
      ...(flags.timeoutMs === undefined ? {} : { timeoutMs: flags.timeoutMs }),
    });
  } catch (error) {
    progress.stop();
    if (error instanceof AbortedError)
      io.stderr.write(`Stopped waiting; ${id} goes on. Resume with: gen wait ${id}\n`);
    else io.stderr.write(`Resume with: gen wait ${id}\n`);
    throw error;
  } finally {
    process.off('SIGINT', onInterrupt);
  }
  progress.stop();
  if (done.status === 'failed') {
    printFinal(done, flags, io);
    throw new GenerationFailedError(done);
  }
  if (done.status === 'rejected') {
    printFinal(done, flags, io);
    throw new GenerationRejectedError(done);
  }
  if (flags['no-download']) {
    if (flags.json || flags.jsonl) printFinal(done, flags, io);
    else
      for (const file of [...(done.output?.images ?? []), ...(done.output?.videos ?? [])])
        io.stdout.write(`${file.url}  ${file.width}×${file.height}  expires ${done.expires_at ?? 'never'}\n`);
    return 0;
  }
  await saveFiles(done, flags, io);
  if (flags.json) printFinal(done, flags, io);
  return 0;
}

function printFinal(done: Generation, flags: RunFlags, io: Io): void {
  if (flags.json && !flags.jsonl) io.stdout.write(JSON.stringify(done, null, 2) + '\n');
}

/** Downloads into `-o DIR` or ./generations/<id>/; paths go to stdout (stderr when stdout carries JSON). */
export async function saveFiles(
  done: Generation,
  flags: Pick<RunFlags, 'output' | 'json' | 'jsonl'>,
  io: Io,
): Promise<void> {
  const dir = path.resolve(io.cwd, flags.output ?? path.join('generations', done.id));
  // Ctrl-C stops the download through its signal, so that the partial file is removed on the way out.
  const controller = new AbortController();
  const onInterrupt = () => controller.abort();
  process.once('SIGINT', onInterrupt);
  let saved;
  try {
    saved = await downloadAll(done, dir, {
      warn: (m) => io.stderr.write(m + '\n'),
      signal: controller.signal,
    });
  } catch (error) {
    if (controller.signal.aborted)
      throw new AbortedError(
        `Download stopped; nothing partial was kept. Again with: gen download ${done.id}`,
        {
          generationId: done.id,
          cause: error,
        },
      );
    throw error;
  } finally {
    process.off('SIGINT', onInterrupt);
  }
  const to = flags.json || flags.jsonl ? io.stderr : io.stdout;
  for (const file of saved)
    to.write(
      `${path.relative(io.cwd, file.path) || file.path}  ${formatBytes(file.size)}  ${file.width}×${file.height}\n`,
    );
}
