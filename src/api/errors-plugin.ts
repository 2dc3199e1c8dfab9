import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay from 'find-my-way';
import { ServiceError } from '@temporalio/client';
import { causeChain, isDependencyFailure } from '../dependencies/failures.js';
import { ApiError, errorCodes, type ErrorCode, type ValidationIssue } from '../vocabulary/errors.js';
import { closeLingering } from '../net/lingering-close.js';

/**
 * The spec's error envelope. A 400 `invalid_request` also has `issues` beside `error` (the spec: "the
 * response has an issues array that names each offending field"), one item per offending field.
 */
interface ErrorBody {
  error: { code: ErrorCode; message: string };
  issues?: ValidationIssue[];
  generation?: unknown;
}

/**
 * Maps every error to the spec's envelope: our ApiErrors as they are, Fastify's
 * own body and content-type errors to their codes, lost dependencies to 503,
 * and anything else to a 500 whose message hides the internals (the log keeps
 * them, under the request id).
 *
 * Unknown paths (404) and methods a path does not have (405, with Allow) are
 * answered as soon as the request is authenticated, before any body is read:
 * a large body sent to a route that does not exist costs nothing. They are
 * authenticated like any route (the app's `authenticate`, from authPlugin, which is
 * registered first), so requests made with a key are logged whatever their path.
 * The errors Fastify raises before routing (its `frameworkErrors` option) are
 * answered the same way by `answerFrameworkError`, decorated on the app.
 */
export const errorsPlugin = fp(
  (app, _options, registered) => {
    app.decorateRequest('errorCode', null);
    const answerError = (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      const apiError = toApiError(error);
      if (apiError.status >= 500) request.log.error({ err: error, request_id: request.id }, 'request failed');
      // Answered before its body had all arrived, and closing (Fastify's body errors, a 413 past the
      // body limit; a batch upload refused as it arrives): the client still sending gets the answer.
      if (!request.raw.complete && /close/i.test(String(reply.getHeader('connection') ?? '')))
        closeLingering(request.raw);
      return sendError(request, reply, apiError);
    };
    app.setErrorHandler(answerError);

    const paths = new KnownPaths();
    app.addHook('onRoute', (route) => paths.add(route.method, route.url, route.config?.public === true));

    /** Authenticates (unless the path is public), then answers with `error`. */
    const answerAfterAuthentication = (
      request: FastifyRequest,
      reply: FastifyReply,
      isPublic: boolean,
      error: () => ApiError,
    ) => {
      if (isPublic) return void sendError(request, reply, error());
      app.authenticate.call(app, request, reply, (authError?: Error) => {
        if (authError) return void answerError(authError as FastifyError, request, reply);
        sendError(request, reply, error());
      });
    };

    app.addHook('onRequest', (request, reply, done) => {
      if (!request.is404) return done();
      const path = request.url.split('?')[0]!;
      const known = paths.find(request.url);
      if (!known) {
        return answerAfterAuthentication(
          request,
          reply,
          false,
          () => new ApiError('not_found', `No route ${request.method} ${path}.`),
        );
      }
      answerAfterAuthentication(request, reply, known.isPublic, () => {
        reply.header('allow', known.allow);
        return new ApiError(
          'method_not_allowed',
          `${path} does not accept ${request.method}; it accepts ${known.allow}.`,
        );
      });
    });
    // Reached only if a route calls reply.callNotFound(): every other unknown route is answered above.
    app.setNotFoundHandler((request, reply) =>
      sendError(
        request,
        reply,
        new ApiError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`),
      ),
    );

    app.decorate(
      'answerFrameworkError',
      (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
        // Fastify runs no hooks for these: the request id and the request log are seen to here.
        reply.header('x-request-id', request.id);
        reply.raw.once('finish', () => app.logRequest(request, reply));
        answerAfterAuthentication(request, reply, false, () =>
          error.code === 'FST_ERR_MAX_PARAM_LENGTH'
            ? new ApiError('not_found', 'No such resource: a path segment is too long to name one.')
            : new ApiError('invalid_request', 'The path is not valid percent-encoded UTF-8.', {
                issues: [
                  {
                    field: '',
                    code: 'invalid_path',
                    message: 'The path is not valid percent-encoded UTF-8.',
                  },
                ],
              }),
        );
      },
    );
    registered();
  },
  { name: 'api-errors', fastify: '5.x', dependencies: ['api-auth'] },
);

type FrameworkErrorHandler = (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void;

/**
 * The paths the app serves and the methods of each, matched the way Fastify's
 * own router (find-my-way, with Fastify's default options) matches them.
 */
class KnownPaths {
  private readonly router = FindMyWay();
  private readonly byPattern = new Map<string, { methods: Set<string>; isPublic: boolean; allow: string }>();

  add(method: string | string[], pattern: string, isPublic: boolean): void {
    let entry = this.byPattern.get(pattern);
    if (!entry) {
      entry = { methods: new Set(), isPublic: true, allow: '' };
      this.byPattern.set(pattern, entry);
      // One tree is enough: the store carries the methods.
      this.router.on('GET', pattern, () => undefined, entry);
    }
    for (const m of [method].flat()) entry.methods.add(m);
    entry.isPublic &&= isPublic;
    entry.allow = [...entry.methods].sort().join(', ');
  }

  find(url: string): { isPublic: boolean; allow: string } | null {
    return (this.router.find('GET', url)?.store as { isPublic: boolean; allow: string } | undefined) ?? null;
  }
}

function sendError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  request.errorCode = error.code;
  if (error.extra.retryAfterSeconds !== undefined)
    reply.header('retry-after', String(error.extra.retryAfterSeconds));
  if (error.extra.requestId) reply.header('x-request-id', error.extra.requestId);
  // RFC 9110: a 401 names the scheme that would work.
  if (error.status === 401) reply.header('www-authenticate', 'Bearer');
  const body: ErrorBody = { error: { code: error.code, message: error.message } };
  if (error.extra.generation !== undefined) body.generation = error.extra.generation;
  if (error.code === 'invalid_request') {
    // Every invalid_request names what was wrong, even one raised without field-level detail.
    body.issues = error.extra.issues ?? [{ field: '', code: 'invalid_value', message: error.message }];
  }
  return reply.code(error.status).type('application/json; charset=utf-8').send(body);
}

function toApiError(error: FastifyError): ApiError {
  if (error instanceof ApiError) return error;
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'Send the body as application/json.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'The request body is too large.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'The body is empty; send a JSON object.', {
        issues: [{ field: '', code: 'required', message: 'A JSON body is required.' }],
      });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return invalidJson(error.message);
  }
  if (error instanceof SyntaxError && error.statusCode === 400) return invalidJson(error.message);
  if (isUnavailable(error)) {
    return new ApiError(
      'service_unavailable',
      'The service is temporarily unavailable. Retry with the same Idempotency-Key and body.',
    );
  }
  // A client error keeps its status (406, 408, 411, 413, 415 each have a code of their own);
  // only a status without one becomes a 400.
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    const code = (Object.entries(errorCodes).find(([, v]) => v.status === error.statusCode)?.[0] ??
      'invalid_request') as ErrorCode;
    return new ApiError(code, error.message);
  }
  return new ApiError(
    'internal_error',
    'Internal error. Retry with the same Idempotency-Key, or quote the x-request-id to support.',
  );
}

function invalidJson(detail: string): ApiError {
  return new ApiError('invalid_request', 'The body is not valid JSON.', {
    issues: [{ field: '', code: 'invalid_json', message: detail }],
  });
}

/** A lost dependency: PostgreSQL or a socket (see isDependencyFailure), or Temporal unreachable or overloaded. */
function isUnavailable(error: unknown): boolean {
  return isDependencyFailure(error) || [...causeChain(error)].some((e) => e instanceof ServiceError);
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Answers an error Fastify raised before routing, in the envelope (errorsPlugin; the `frameworkErrors` option). */
    answerFrameworkError: FrameworkErrorHandler;
  }
  interface FastifyRequest {
    /** The error code this request was answered with, for the request log. */
    errorCode: string | null;
  }
}
