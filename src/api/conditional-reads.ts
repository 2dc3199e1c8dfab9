import { createHash } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import type { GenerationRow } from '../db/generation-reads.js';
import type { GenerationStatus } from '../vocabulary/generation.js';
import { toGeneration } from './generation-view.js';

/**
 * The poll interval a client should follow while a generation is queued, in seconds: the lower end
 * of the 2 to 3 seconds the spec recommends. It is not estimated per model: a provider's queue makes
 * any typical duration a poor guess, and a client that waits with `Prefer: wait` needs no interval.
 */
export const pollIntervalSeconds = 2;

/** Where polling stops (the spec's terminal statuses). */
export function isTerminal(status: GenerationStatus): boolean {
  return status !== 'queued';
}

/** A generation's body and its strong ETag, computed once per projection row (rows are shared by the cache). */
const rendered = new WeakMap<GenerationRow, { body: string; etag: string }>();

/**
 * The generation as JSON and its strong entity tag: a digest of exactly the bytes sent, so the tag
 * changes whenever anything in the body does, and two API processes give the same tag.
 */
export function renderGeneration(row: GenerationRow): { body: string; etag: string } {
  let hit = rendered.get(row);
  if (!hit) {
    const body = JSON.stringify(toGeneration(row));
    hit = { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"` };
    rendered.set(row, hit);
  }
  return hit;
}

/**
 * Whether If-None-Match names the current representation (RFC 9110 §13.1.2: `*`, or a list of
 * entity tags compared weakly). Malformed members simply do not match.
 */
export function noneMatchHits(header: string | string[] | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const value = [header].flat().join(',');
  if (value.trim() === '*') return true;
  return value
    .split(',')
    .map((tag) => tag.trim().replace(/^W\//, ''))
    .includes(etag);
}

/**
 * Answers with a generation: its ETag, Retry-After while it is queued, and either 304 with no body
 * (If-None-Match names it) or the JSON body at `status`.
 */
export function sendGeneration(
  reply: FastifyReply,
  row: GenerationRow,
  options: { status: 200 | 202; ifNoneMatch?: string | string[] | undefined },
): FastifyReply {
  const { body, etag } = renderGeneration(row);
  reply.header('etag', etag);
  if (!isTerminal(row.status)) reply.header('retry-after', String(pollIntervalSeconds));
  if (options.status === 200 && noneMatchHits(options.ifNoneMatch, etag)) return reply.code(304).send();
  return reply.code(options.status).type('application/json; charset=utf-8').send(body);
}
