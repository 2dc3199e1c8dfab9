import { fileURLToPath } from 'node:url';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import multipart from '@fastify/multipart';
import fastifyStatic from '@fastify/static';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { fastifyTrustProxy } from '../config/client-address.js';
import type { TrustProxy } from '../config/service-config.js';
import { closeUnusedConnectionsOnShutdown } from '../net/unused-connections.js';
import { newId } from '../vocabulary/ids.js';
import { sendPage } from './render.js';
import { addSecurityHeaders, isLoopbackHttp } from './security.js';
import { csrfTokenFor, sameToken } from './session-ids.js';
import type { ConsoleSessions, ConsoleUser } from './sessions.js';
import { consoleRoutes } from './routes/index.js';
import type { ConsoleRouteDeps } from './route-deps.js';
import { formField, SESSION_COOKIE, userOf } from './request-fields.js';
import { StreamedForm } from './uploads.js';

export interface ConsoleAppDeps extends Omit<ConsoleRouteDeps, 'cookie'> {
  logger: FastifyBaseLogger;
  sessions: ConsoleSessions;
  /** The console's public base URL: its cookie is `Secure` unless this is plain HTTP on loopback. */
  publicUrl: string;
  resultBaseUrl: string;
  /** Whose X-Forwarded-For names the client (the API's TRUST_PROXY). */
  trustProxy: TrustProxy;
}

/**
 * The account console: server-rendered pages on the same repositories and admission path as the
 * API. Every route needs a session unless marked `consolePublic`; every state-changing request
 * (POST) needs the form token of its session (or, before sign-in, the pre-session form cookie).
 */
export async function buildConsoleApp(deps: ConsoleAppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger,
    // As the API: no line per request. A URL can carry a secret (a sign-in link's token), and
    // the request log people read is the account's own, written by the routes that act.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    genReqId: () => newId('req'),
    trustProxy: fastifyTrustProxy(deps.trustProxy),
    bodyLimit: FORM_BODY_LIMIT,
  });
  // Stopping waits for the requests in flight, not for idle keep-alive connections (72 s).
  closeUnusedConnectionsOnShutdown(app);
  const secure = !isLoopbackHttp(deps.publicUrl);
  const cookieOptions = { path: '/', httpOnly: true, sameSite: 'strict', secure } as const;
  await app.register(cookie);
  // Forms only: urlencoded (small), and multipart where a route takes uploads (consoleUpload).
  app.removeAllContentTypeParsers();
  await app.register(formbody, { bodyLimit: FORM_BODY_LIMIT });
  await app.register(multipart);
  await app.register(fastifyStatic, {
    root: fileURLToPath(new URL('./static/', import.meta.url)),
    prefix: '/static/',
    cacheControl: true,
    maxAge: 300_000,
  });
  addSecurityHeaders(app, deps.resultBaseUrl);
  app.decorateRequest('consoleUser', null);
  app.decorateRequest('consoleForm', null);

  /**
   * Before any body is read (onRequest): a multipart body where no upload is taken is refused,
   * and so is a request without a live session. An unread body is then discarded as it arrives.
   */
  const refuseUnreadBodies = async (request: FastifyRequest, reply: FastifyReply) => {
    if (isMultipart(request) && !request.routeOptions.config.consoleUpload)
      return reply.code(415).type('text/plain').send('This address takes no file uploads.');
  };
  const guard = async (request: FastifyRequest, reply: FastifyReply) => {
    const resumed = await deps.sessions.resume(request.cookies[SESSION_COOKIE]);
    if (!resumed.ok) {
      if (request.cookies[SESSION_COOKIE]) reply.clearCookie(SESSION_COOKIE, cookieOptions);
      const query = resumed.reason ? `?ended=${encodeURIComponent(resumed.reason)}` : '';
      if (request.method === 'GET') return reply.redirect(`/sign-in${query}`, 303);
      return reply.code(401).type('text/plain').send('Not signed in.');
    }
    request.consoleUser = resumed.user;
  };
  /**
   * Then the form's token (preValidation): a urlencoded form is at most 64 KiB, read once the
   * session is known; an upload is opened and only its first part read, which must be the token.
   */
  const csrf = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.method === 'GET' || request.method === 'HEAD') return;
    let token = formField(request.body, '_csrf');
    if (isMultipart(request)) {
      request.consoleForm = await StreamedForm.open(request, deps.uploadLimits);
      token = request.consoleForm.field('_csrf');
      // Over the limit before its token was read: the route answers 413, nothing read or done.
      if (request.consoleForm.refusal) return;
    }
    if (!sameToken(csrfTokenFor(userOf(request).sessionId), token)) {
      await request.consoleForm?.discard();
      return reply.code(403).type('text/plain').send('This form has expired or did not come from this site.');
    }
  };
  app.addHook('onRequest', refuseUnreadBodies);
  app.addHook('onRoute', (route) => {
    if (route.config?.consolePublic || route.url.startsWith('/static')) return;
    route.onRequest = [guard, ...(route.onRequest ? [route.onRequest].flat() : [])];
    route.preValidation = [csrf, ...(route.preValidation ? [route.preValidation].flat() : [])];
  });
  // An upload's temporary files go whatever the answer (the route discards them too, once done).
  app.addHook('onResponse', async (request) => {
    await request.consoleForm?.discard();
  });

  app.setNotFoundHandler((request, reply) =>
    sendPage(request, reply, 'not-found', { title: 'Not found' }, 404),
  );
  app.setErrorHandler((error: { statusCode?: number; message?: string }, request, reply) => {
    const status = error.statusCode && error.statusCode < 500 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'console request failed');
    const message = status >= 500 ? 'Something went wrong on our side. Try again.' : (error.message ?? '');
    return sendPage(request, reply, 'error', { title: 'Error', message }, status);
  });

  await app.register((scope, _options, done) => {
    consoleRoutes(scope, { ...deps, cookie: cookieOptions });
    done();
  });
  await app.ready();
  return app;
}

/** The largest urlencoded form (every console form but the playground's uploads). */
const FORM_BODY_LIMIT = 64 * 1024;

function isMultipart(request: FastifyRequest): boolean {
  return /^multipart\//i.test(request.headers['content-type'] ?? '');
}

declare module 'fastify' {
  interface FastifyRequest {
    consoleUser: ConsoleUser | null;
    /** A multipart form being read (consoleUpload routes), opened by the CSRF check. */
    consoleForm: StreamedForm | null;
  }
  interface FastifyContextConfig {
    /** Reachable without a session (sign-in). */
    consolePublic?: boolean;
    /** Takes a multipart form with files (the playground); every other route refuses one unread. */
    consoleUpload?: boolean;
  }
}
