import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GenerationRow } from '../db/generation-reads.js';
import { isTerminal } from './conditional-reads.js';
import { maxWaitSeconds, type GenerationWaiters } from './generation-waiters.js';

/**
 * The `wait` preference of a Prefer header (RFC 7240: comma-separated preferences, each `name[=value]`
 * with `;`-parameters), in whole seconds from 1 to `max` (larger values are clamped). A missing,
 * zero or malformed `wait` is no preference: the request is answered at once, as without the header.
 */
export function preferredWaitSeconds(header: string | string[] | undefined, max: number): number | null {
  if (header === undefined) return null;
  for (const preference of [header].flat().join(',').split(',')) {
    const [token] = preference.split(';');
    const match = /^\s*wait\s*=\s*"?(\d{1,9})"?\s*$/i.exec(token ?? '');
    if (!match) continue;
    const seconds = Number(match[1]);
    return seconds >= 1 ? Math.min(seconds, max) : null;
  }
  return null;
}

/**
 * Honours `Prefer: wait=N` for a generation read as `row`: says what was applied
 * (Preference-Applied), then holds the answer until the generation is terminal or N seconds have
 * passed, the client has gone, or the process shuts down, and gives the generation as it then
 * stands. Without the preference, without waiters, or past a cap on waiters, the row is answered
 * at once and no Preference-Applied says otherwise. Never throws: a POST's generation is started
 * and charged by now, and a read that fails after the wait answers with `row`, the last state seen.
 */
export async function honourPreferWait(
  request: FastifyRequest,
  reply: FastifyReply,
  row: GenerationRow,
  waiting: {
    waiters: GenerationWaiters;
    maxSeconds?: number;
    keyId: string;
    reread: () => Promise<GenerationRow | null>;
  },
): Promise<GenerationRow> {
  const seconds = preferredWaitSeconds(request.headers.prefer, waiting.maxSeconds ?? maxWaitSeconds);
  if (seconds === null) return row;
  if (isTerminal(row.status)) {
    reply.header('preference-applied', `wait=${seconds}`);
    return row;
  }
  const gone = new AbortController();
  const onClose = () => gone.abort();
  const woken = waiting.waiters.wait(row.id, waiting.keyId, seconds * 1000, waiting.reread, gone.signal);
  if (!woken) return row; // past a cap: answered now, as without the preference
  reply.header('preference-applied', `wait=${seconds}`);
  reply.raw.once('close', onClose);
  try {
    return (await woken) ?? (await waiting.reread()) ?? row;
  } catch (error) {
    request.log.warn(
      { err: error, generation_id: row.id, request_id: request.id },
      'a waited generation could not be read again; answered as last seen',
    );
    return row;
  } finally {
    reply.raw.off('close', onClose);
  }
}
