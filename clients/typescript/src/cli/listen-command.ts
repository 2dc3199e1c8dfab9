import { createHmac } from 'node:crypto';
import type { Client } from '../client.js';
import { AbortedError, ApiError, ConnectionError } from '../core/errors.js';
import { backoffMs, isRetryableStatus } from '../core/retry-policy.js';
import { abortableSleep, anySignal } from '../core/signals.js';
import type { AccountEvent } from '../resources/account-events.js';
import type { GenerationEventType, WebhookSecret } from '../types.js';
import { UsageError } from './exit-codes.js';
import type { Io } from './run-command.js';

export interface ListenFlags {
  'forward-to'?: string | undefined;
  events?: string | undefined;
  json: boolean;
}

const eventTypes = Object.keys({
  'generation.created': true,
  'generation.processing': true,
  'generation.succeeded': true,
  'generation.failed': true,
  'generation.rejected': true,
  'generation.refunded': true,
  'generation.requeued': true,
  'generation.updated': true,
  'generation.content_expired': true,
} satisfies Record<GenerationEventType, true>);

/** The receiver's time to answer, as a webhook delivery's. */
const receiverTimeoutMs = 15_000;
/** How long a secret read is used before it is read again (a rotation is picked up within this). */
const secretMaxAgeMs = 60_000;

function parseTarget(text: string | undefined): URL | undefined {
  if (text === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new UsageError(
      `--forward-to ${text}: expected an http:// or https:// URL, such as http://localhost:3000/hook`,
    );
  return url;
}

function parseTypes(text: string | undefined): Set<string> | undefined {
  if (text === undefined) return undefined;
  const types = text
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const unknown = types.filter((t) => !eventTypes.includes(t));
  if (types.length === 0 || unknown.length > 0)
    throw new UsageError(`--events ${text}: expected event types from ${eventTypes.join(', ')}`);
  return new Set(types);
}

/** The Standard Webhooks headers of one delivery, as the service signs it (src/webhook-signing.ts). */
export function signDelivery(id: string, timestamp: number, body: string, secrets: string[]) {
  const signed = `${id}.${timestamp}.${body}`;
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets
      .map((s) => {
        const key = Buffer.from(s.replace(/^whsec_/, ''), 'base64');
        return `v1,${createHmac('sha256', key).update(signed, 'utf8').digest('base64')}`;
      })
      .join(' '),
  };
}

/** The secrets a delivery is signed with now: the current one, and the previous one while it still signs. */
function signingSecrets(secret: WebhookSecret): string[] {
  const previous = secret.previous;
  return previous && Date.parse(previous.expires_at) > Date.now()
    ? [secret.secret, previous.secret]
    : [secret.secret];
}

const describeError = (error: unknown) => {
  const cause = (error as { cause?: { code?: unknown } }).cause;
  const code = typeof cause?.code === 'string' ? ` (${cause.code})` : '';
  return `${error instanceof Error ? error.message : String(error)}${code}`;
};

/**
 * `gen listen [--forward-to URL] [--events TYPES]`: follows the account's events (GET /v1/events)
 * and prints a line for each; with --forward-to, POSTs each one to URL as a webhook delivery would
 * be (the same body bytes, the same webhook-id, signed with the account's secret), so the
 * receiver's own verification runs unchanged. A receiver's failure is printed, not retried, and
 * does not stop it; a lost stream is resumed without loss. Ctrl-C ends it (exit 0).
 */
export async function listenCommand(client: Client, flags: ListenFlags, io: Io): Promise<number> {
  const target = parseTarget(flags['forward-to']);
  const wanted = parseTypes(flags.events);
  const stop = new AbortController();
  const onInterrupt = () => stop.abort(new Error('interrupted'));
  process.once('SIGINT', onInterrupt);
  process.once('SIGTERM', onInterrupt);
  try {
    let secret = target ? await client.webhooks.secret({ signal: stop.signal }) : undefined;
    let secretReadAt = Date.now();
    const secretsNow = async () => {
      if (Date.now() - secretReadAt > secretMaxAgeMs) {
        secret = await client.webhooks.secret({ signal: stop.signal }).catch(() => secret);
        secretReadAt = Date.now();
      }
      return signingSecrets(secret!);
    };
    let cursor: string | undefined;
    let opened = 0;
    let lost = 0;
    const onOpen = () => {
      if (opened++ === 0)
        io.stderr.write(
          `Ready: ${target ? `forwarding this account's ${wanted ? [...wanted].join(', ') : 'events'} to ${target.href}` : `printing this account's ${wanted ? [...wanted].join(', ') : 'events'}`}` +
            `${secret ? `, signed with its webhook secret ${secret.secret.slice(0, 10)}…` : ''} (Ctrl-C to stop).\n`,
        );
      else io.stderr.write('Reconnected: nothing was missed.\n');
      lost = 0;
    };
    for (;;) {
      try {
        // The first iteration pins where it starts (onStart): a later one resumes there, even
        // when the stream was lost before its first event.
        const onStart = (start: string) => (cursor ??= start);
        for await (const item of client.events({
          lastEventId: cursor,
          signal: stop.signal,
          onOpen,
          onStart,
        })) {
          cursor = item.cursor;
          if (wanted && !wanted.has(item.event.type)) continue;
          if (!target) {
            report(io, flags, item, {});
            continue;
          }
          report(io, flags, item, await forward(target, item, await secretsNow(), stop.signal));
        }
      } catch (error) {
        if (stop.signal.aborted || error instanceof AbortedError) break;
        const retryable =
          error instanceof ConnectionError || (error instanceof ApiError && isRetryableStatus(error.status));
        if (!retryable) throw error;
        const delay = Math.min(8000, 1000 + backoffMs(lost++));
        io.stderr.write(
          `Lost the stream (${describeError(error)}); reconnecting in ${Math.ceil(delay / 1000)} s.\n`,
        );
        try {
          await abortableSleep(delay, stop.signal);
        } catch {
          break;
        }
      }
    }
    io.stderr.write('Stopped listening.\n');
    return 0;
  } finally {
    process.off('SIGINT', onInterrupt);
    process.off('SIGTERM', onInterrupt);
  }
}

interface Forwarded {
  status?: number;
  error?: string;
  ms?: number;
  webhookId?: string;
}

/** One POST to the receiver, as the service's delivery of this event would be. */
async function forward(
  target: URL,
  { event, raw }: AccountEvent,
  secrets: string[],
  stop: AbortSignal,
): Promise<Forwarded> {
  const webhookId = `msg_${event.data.id}_${event.id}`;
  const headers = signDelivery(webhookId, Math.floor(Date.now() / 1000), raw, secrets);
  const started = performance.now();
  const timeout = AbortSignal.timeout(receiverTimeoutMs);
  try {
    const response = await fetch(target, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'gen-listen' },
      body: raw, // the bytes the API sent: a webhook delivery's body
      redirect: 'manual', // as deliveries: a redirect is not followed
      signal: anySignal([stop, timeout]),
    });
    await response.arrayBuffer().catch(() => undefined);
    return { status: response.status, ms: Math.round(performance.now() - started), webhookId };
  } catch (error) {
    if (stop.aborted) throw new AbortedError('Stopped listening.', { cause: error });
    const why = timeout.aborted ? `no answer within ${receiverTimeoutMs / 1000} s` : describeError(error);
    return { error: why, ms: Math.round(performance.now() - started), webhookId };
  }
}

function report(io: Io, flags: ListenFlags, { cursor, event }: AccountEvent, forwarded: Forwarded): void {
  if (flags.json) {
    io.stdout.write(
      JSON.stringify({
        type: event.type,
        generation_id: event.data.id,
        event_id: event.id,
        cursor,
        ...(forwarded.webhookId === undefined
          ? {}
          : { webhook_id: forwarded.webhookId, status: forwarded.status ?? null, ms: forwarded.ms }),
        ...(forwarded.error === undefined ? {} : { error: forwarded.error }),
      }) + '\n',
    );
    return;
  }
  const time = new Date().toTimeString().slice(0, 8);
  const outcome =
    forwarded.webhookId === undefined
      ? 'status' in event.data
        ? event.data.status
        : `spend limit ${event.data.spend_limit} reached`
      : forwarded.error !== undefined
        ? `→ failed: ${forwarded.error}`
        : `→ ${forwarded.status} (${forwarded.ms} ms)`;
  io.stdout.write(`${time}  ${event.type.padEnd(26)}  ${event.data.id}  ${outcome}\n`);
}
