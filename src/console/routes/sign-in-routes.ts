import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formField, SESSION_COOKIE } from '../request-fields.js';
import { sendPage } from '../render.js';
import { newSecret, sameToken } from '../session-ids.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import type { SignIn } from '../sessions.js';
import { userOf } from '../request-fields.js';

/** Before a session exists, forms are protected by a double-submit token: a cookie and the same value in the form. */
const FORM_COOKIE = 'console_form';

/**
 * Where a sign-in goes on to: only a page of this console that asked for it (an app's sign-in,
 * /oauth/interaction/…), never an address someone else chose.
 */
function nextPage(value: unknown): string | null {
  return typeof value === 'string' && /^\/oauth\/interaction\/[A-Za-z0-9_-]{1,64}$/.test(value)
    ? value
    : null;
}

/** Sign-in with a pasted API key or a one-time link, and sign-out. */
export function signInRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  const formToken = (request: FastifyRequest, reply: FastifyReply): string => {
    const existing = request.cookies[FORM_COOKIE];
    if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
    const token = newSecret();
    reply.setCookie(FORM_COOKIE, token, deps.cookie);
    return token;
  };
  const formIsOurs = (request: FastifyRequest) => {
    const cookieToken = request.cookies[FORM_COOKIE];
    return cookieToken !== undefined && sameToken(cookieToken, formField(request.body, '_csrf'));
  };
  const signedIn = (request: FastifyRequest, reply: FastifyReply, sessionId: string) =>
    reply
      .setCookie(SESSION_COOKIE, sessionId, deps.cookie)
      .redirect(nextPage(formField(request.body, 'next')) ?? '/', 303);

  app.get<{ Querystring: { ended?: string; next?: string } }>(
    '/sign-in',
    { config: { consolePublic: true } },
    async (request, reply) =>
      sendPage(request, reply, 'sign-in', {
        title: 'Sign in',
        csrf: formToken(request, reply),
        message: typeof request.query.ended === 'string' ? request.query.ended.slice(0, 200) : null,
        next: nextPage(request.query.next),
      }),
  );

  /** A sign-in form's POST: the form must be ours; then the session it opens, or the refusal in words. */
  const refused = (request: FastifyRequest, reply: FastifyReply, message: string, status: number) =>
    sendPage(
      request,
      reply,
      'sign-in',
      {
        title: 'Sign in',
        csrf: formToken(request, reply),
        message,
        next: nextPage(formField(request.body, 'next')),
      },
      status,
    );
  const signInWith =
    (attempt: (request: FastifyRequest) => Promise<SignIn>) =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      if (!formIsOurs(request)) return refused(request, reply, 'The form expired; try again.', 403);
      const result = await attempt(request);
      if (result.ok) return signedIn(request, reply, result.sessionId);
      if (result.retryAfterSeconds !== undefined)
        reply.header('retry-after', String(result.retryAfterSeconds));
      return refused(request, reply, result.message, result.status);
    };
  /** Before the body is read: a sign-in form comes with its form cookie, or it did not come from our page. */
  const formCookieFirst = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!request.cookies[FORM_COOKIE]) return refused(request, reply, 'The form expired; try again.', 403);
  };

  app.post(
    '/sign-in',
    { config: { consolePublic: true }, onRequest: formCookieFirst },
    signInWith((request) =>
      deps.sessions.signInWithKey(formField(request.body, 'key') ?? '', deps.clientSubject(request)),
    ),
  );

  // The link only shows a button: prefetchers and link scanners that open it do not use it up.
  app.get<{ Querystring: { token?: string } }>(
    '/sign-in/link',
    { config: { consolePublic: true } },
    async (request, reply) =>
      sendPage(request, reply, 'sign-in-link', {
        title: 'Sign in',
        csrf: formToken(request, reply),
        token: typeof request.query.token === 'string' ? request.query.token.slice(0, 100) : '',
      }),
  );

  app.post(
    '/sign-in/link',
    { config: { consolePublic: true }, onRequest: formCookieFirst },
    signInWith((request) =>
      deps.sessions.signInWithLink(formField(request.body, 'token') ?? '', deps.clientSubject(request)),
    ),
  );

  app.post('/sign-out', async (request, reply) => {
    await deps.sessions.signOut(userOf(request).sessionId);
    return reply
      .clearCookie(SESSION_COOKIE, deps.cookie)
      .redirect(`/sign-in?ended=${encodeURIComponent('You have signed out.')}`, 303);
  });
}
