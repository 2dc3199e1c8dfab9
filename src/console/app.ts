import { fileURLToPath } from 'node:url';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import multipart from '@fastify/multipart';
import fastifyStatic from '@fastify/static';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { newId } from '../ids.js';
import { sendPage } from './render.js';
import { addSecurityHeaders, isLoopbackHttp } from './security.js';
import { csrfTokenFor, sameToken } from './session-ids.js';
import type { ConsoleSessions, ConsoleUser } from './sessions.js';
import { consoleRoutes } from './routes/index.js';
import type { ConsoleRouteDeps } from './route-deps.js';
import { formField, SESSION_COOKIE } from './request-fields.js';

export interface ConsoleAppDeps extends Omit<ConsoleRouteDeps, 'cookie'> {
  logger: FastifyBaseLogger;
  sessions: ConsoleSessions;
  /** The console's public base URL: its cookie is `Secure` unless this is plain HTTP on loopback. */
  publicUrl: string;
  resultBaseUrl: string;
  /** Largest reference image the playground takes, in bytes. */
  maxUploadBytes: number;
}

/**
 * The account console: server-rendered pages on the same repositories and admission path as the
 * API. Every route needs a session unless marked `consolePublic`; every state-changing request
 * (POST) needs the form token of its session (or, before sign-in, the pre-session form cookie).
 */
export async function buildConsoleApp(deps: ConsoleAppDeps): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: deps.logger, genReqId: () => newId('req'), trustProxy: false });
  const secure = !isLoopbackHttp(deps.publicUrl);
  const cookieOptions = { path: '/', httpOnly: true, sameSite: 'strict', secure } as const;
  await app.register(cookie);
  await app.register(formbody, { bodyLimit: 64 * 1024 });
  await app.register(multipart, {
    attachFieldsToBody: true,
    limits: { fileSize: deps.maxUploadBytes, files: 16, fields: 64 },
  });
  await app.register(fastifyStatic, {
    root: fileURLToPath(new URL('./static/', import.meta.url)),
    prefix: '/static/',
    cacheControl: true,
    maxAge: 300_000,
  });
  addSecurityHeaders(app, deps.resultBaseUrl);
  app.decorateRequest('consoleUser', null);

  const guard = async (request: FastifyRequest, reply: FastifyReply) => {
    const resumed = await deps.sessions.resume(request.cookies[SESSION_COOKIE]);
    if (!resumed.ok) {
      if (request.cookies[SESSION_COOKIE]) reply.clearCookie(SESSION_COOKIE, cookieOptions);
      const query = resumed.reason ? `?ended=${encodeURIComponent(resumed.reason)}` : '';
      if (request.method === 'GET') return reply.redirect(`/sign-in${query}`, 303);
      return reply.code(401).type('text/plain').send('Not signed in.');
    }
    request.consoleUser = resumed.user;
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      if (!sameToken(csrfTokenFor(resumed.user.sessionId), formField(request.body, '_csrf'))) {
        return reply
          .code(403)
          .type('text/plain')
          .send('This form has expired or did not come from this site.');
      }
    }
  };
  app.addHook('onRoute', (route) => {
    if (route.config?.consolePublic || route.url.startsWith('/static')) return;
    const existing = route.preHandler ? [route.preHandler].flat() : [];
    route.preHandler = [guard, ...existing];
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

declare module 'fastify' {
  interface FastifyRequest {
    consoleUser: ConsoleUser | null;
  }
  interface FastifyContextConfig {
    /** Reachable without a session (sign-in). */
    consolePublic?: boolean;
  }
}
