import type { FastifyRequest } from 'fastify';
import type { ConsoleUser } from './sessions.js';

/** The cookie holding the browser's session id (HttpOnly, SameSite=Strict, Secure off loopback). */
export const SESSION_COOKIE = 'console_session';

/** A form field's text, from a urlencoded body or a multipart one (attachFieldsToBody). */
export function formField(body: unknown, name: string): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const value = (body as Record<string, unknown>)[name];
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && 'value' in value && !('file' in value)) {
    return typeof value.value === 'string' ? value.value : undefined;
  }
  return undefined;
}

/** The signed-in user of a guarded route. */
export function userOf(request: FastifyRequest): ConsoleUser {
  if (!request.consoleUser) throw new Error('console route reached without a session');
  return request.consoleUser;
}
