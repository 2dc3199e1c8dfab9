import type { FastifyRequest } from 'fastify';
import type { ConsoleUser } from './sessions.js';

/** The cookie holding the browser's session id (HttpOnly, SameSite=Strict, Secure off loopback). */
export const SESSION_COOKIE = 'console_session';

/** A urlencoded form field's text (a multipart form is read as it streams: StreamedForm). */
export function formField(body: unknown, name: string): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

/** The signed-in user of a guarded route. */
export function userOf(request: FastifyRequest): ConsoleUser {
  if (!request.consoleUser) throw new Error('console route reached without a session');
  return request.consoleUser;
}
