import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { keyRateLimitRefusal, rateLimitWords } from '../../auth/rate-limit.js';
import type { CompiledModel } from '../../catalog/catalog-cache.js';
import { getBalance } from '../../db/credits-repository.js';
import { requestLogEntry } from '../../db/request-log-repository.js';
import { ApiError, ValidationError, type ValidationIssue } from '../../vocabulary/errors.js';
import {
  admitGeneration,
  GenerationRefused,
  quoteGeneration,
} from '../../generations/admission/admit-generation.js';
import { requestedModel } from '../../generations/admission/generation-request.js';
import { readOnlyRefusal } from '../../generations/admission/key-rules.js';
import { newId } from '../../vocabulary/ids.js';
import { closeLingering } from '../../net/lingering-close.js';
import { bodyFromForm, formFields } from '../playground-form.js';
import { judgeUploads } from '../playground-images.js';
import { sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';
import type { ConsoleUser } from '../sessions.js';
import { UploadTooLarge, type StreamedForm } from '../uploads.js';

/**
 * The playground: a form made from the model's published description, its price quoted before it
 * is sent, and a submission that goes through the API's own admission path (admitGeneration) on
 * behalf of the session's key. Each rendered form carries its own
 * Idempotency-Key, so a double click or a resubmitted form is one generation and one debit.
 */
export function playgroundRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  const page = playgroundPage(deps);

  app.get<{ Querystring: { model?: string } }>('/playground', async (request, reply) => {
    const model = page.modelNamed(request.query.model);
    if (!model)
      return sendPage(
        request,
        reply,
        'error',
        { title: 'Playground', message: 'No models are available.' },
        503,
      );
    return page.show(request, reply, model, {});
  });

  /** The price of the form as it stands (the page's script asks as options change). */
  app.get<{ Querystring: Record<string, string> }>('/playground/quote', async (request) => {
    const model = page.modelNamed(request.query.model);
    if (!model) return { credits: null };
    const query = { ...request.query, prompt: 'x' } as Record<string, unknown>;
    const body = bodyFromForm(model.publicView, {
      field: (name) => (typeof query[name] === 'string' ? query[name] : undefined),
      images: () => [],
    });
    return { credits: await page.quote(body) };
  });

  /**
   * A generation from the form. The upload was opened by the CSRF check, which read only its
   * token; the rest is read only once the key's rate limit allows one more request, as the API
   * counts one, and streams to temporary files within the API's limits (413 past them).
   */
  app.post(
    '/playground',
    {
      config: { consoleUpload: true },
      // The temporary files go before the answer does: an answered form has left nothing on disk.
      onSend: async (request) => {
        await request.consoleForm?.discard();
      },
    },
    async (request, reply) => {
      const form = request.consoleForm;
      if (!form)
        return reply.code(415).type('text/plain').send('The playground form is sent as multipart/form-data.');
      try {
        return await generate(deps, page, request, reply, form);
      } finally {
        // Also when no answer was sent (an error the error handler answers after this).
        await form.discard();
      }
    },
  );
}

interface PageExtra {
  values?: Record<string, unknown>;
  issues?: ValidationIssue[];
  message?: string | null;
  status?: number;
}

type PlaygroundPage = ReturnType<typeof playgroundPage>;

/** The playground's page: a model's form, priced now, beside the balance, with a fresh Idempotency-Key. */
function playgroundPage(deps: ConsoleRouteDeps) {
  /** The model a link names, else the first one (none: the catalog is empty). */
  const modelNamed = (id: unknown): CompiledModel | undefined =>
    (typeof id === 'string' ? deps.catalog.get(id) : undefined) ?? deps.catalog.list()[0];

  /** The quote the API gives for these fields (null while they are not a valid request). */
  const quote = (body: Record<string, unknown>): Promise<number | null> =>
    quoteGeneration(deps.admission, body).then(
      (quoted) => quoted.credits,
      (error: unknown) => {
        if (error instanceof ValidationError) return null;
        throw error;
      },
    );

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    model: CompiledModel,
    extra: PageExtra,
  ) => {
    const values = extra.values ?? {};
    const balance = await getBalance(deps.db, userOf(request).accountId);
    return sendPage(
      request,
      reply,
      'playground',
      {
        title: 'Playground',
        model: model.publicView,
        models: deps.catalog
          .list()
          .map((m) => ({ id: m.entry.id, name: m.entry.name, selected: m === model })),
        fields: formFields(model.publicView, values),
        prompt: typeof values.prompt === 'string' ? values.prompt : '',
        price:
          (await quote({ model: model.entry.id, prompt: 'x', ...withoutImages(values) })) ??
          model.publicView.default_price,
        balance,
        idempotencyKey: `console-${randomUUID()}`,
        issues: extra.issues ?? [],
        message: extra.message ?? null,
      },
      extra.status ?? 200,
    );
  };

  return { modelNamed, quote, show };
}

/**
 * The form again, 413, for a form past the limits. The rest of it is not read: the connection
 * closes once the page is sent, lingering for what the browser still sends (a few seconds at most)
 * so that it shows the page rather than a reset.
 */
function tooLarge(
  page: PlaygroundPage,
  request: FastifyRequest,
  reply: FastifyReply,
  model: Parameters<PlaygroundPage['show']>[2],
  message: string,
) {
  if (!request.raw.complete) {
    reply.header('connection', 'close');
    closeLingering(request.raw);
  }
  return page.show(request, reply, model, { message, status: 413 });
}

/**
 * A sent form, as the API answers a POST /v1/generations made with the session's key: refused
 * before its body is read past the key's rate limit or for a read-only key; else read (413 past
 * the limits), its model checked as admission checks it (never another in its place), admitted
 * (admitGeneration), and shown its generation, or the form again with what was wrong.
 */
async function generate(
  deps: ConsoleRouteDeps,
  page: PlaygroundPage,
  request: FastifyRequest,
  reply: FastifyReply,
  form: StreamedForm,
) {
  const user = userOf(request);
  const logRequest = requestLogger(deps, request, user);
  const firstModel = deps.catalog.list()[0];
  if (!firstModel) return reply.code(503).type('text/plain').send('No models are available.');
  if (form.refusal) return tooLarge(page, request, reply, firstModel, form.refusal);
  const refused = await refusedUnread(deps, user);
  if (refused) {
    logRequest(newId('req'), refused.error);
    if (refused.error.extra.retryAfterSeconds !== undefined)
      reply.header('retry-after', String(refused.error.extra.retryAfterSeconds));
    return page.show(request, reply, firstModel, { message: refused.message, status: refused.error.status });
  }
  try {
    await form.readAll();
  } catch (error) {
    if (!(error instanceof UploadTooLarge)) throw error;
    const named = deps.catalog.get(form.field('model') ?? '') ?? firstModel;
    return tooLarge(page, request, reply, named, error.message);
  }
  const requested = requestedModel(deps.catalog, form.field('model'));
  if (!requested.ok) {
    const message = `The model “${(form.field('model') ?? '').slice(0, 100)}” is not available (unknown or retired), so nothing was generated or charged. Choose one of the models below.`;
    return page.show(request, reply, firstModel, { message, status: 400 });
  }
  const { model } = requested;
  const uploads = await judgeUploads(model.publicView, form);
  const body = bodyFromForm(model.publicView, {
    field: (name) => form.field(name),
    images: (name) => uploads.standIns(name),
  });
  let admitted: { generationId: string };
  try {
    // As the API: a resubmitted form that was accepted is shown its generation; a new one is
    // refused while its provider is down. The uploads are stored from their staged files.
    admitted = await admitGeneration(
      deps.admission,
      { principal: user, idempotencyKey: form.field('idempotency_key'), body, recordInvalid: false, uploads },
      request.log,
    );
  } catch (error) {
    // An invalid form is shown again with its issues beside the fields: no request was made.
    if (error instanceof ValidationError)
      return page.show(request, reply, model, {
        values: body,
        issues: error.extra.issues ?? [],
        status: 400,
      });
    if (!(error instanceof ApiError)) throw error;
    if (error instanceof GenerationRefused) {
      logRequest(error.generationId, error);
      const message =
        error.outcome === 'conflict'
          ? 'This form was already sent with other values. Reload the playground to start a new generation.'
          : error.message;
      return page.show(request, reply, model, { values: body, message, status: 409 });
    }
    logRequest(newId('req'), error);
    if (error.extra.retryAfterSeconds !== undefined)
      reply.header('retry-after', String(error.extra.retryAfterSeconds));
    return page.show(request, reply, model, { values: body, message: error.message, status: error.status });
  }
  logRequest(admitted.generationId, null);
  return reply.redirect(`/generations/${admitted.generationId}`, 303);
}

/**
 * Whether the API would refuse the form's request before reading it, and the page's words: past
 * the key's rate limit (the API's own count and 429), or from a read-only key (its 403).
 */
async function refusedUnread(
  deps: ConsoleRouteDeps,
  user: ConsoleUser,
): Promise<{ error: ApiError; message: string } | undefined> {
  const limited = keyRateLimitRefusal(deps.limits.requestsPerKey, await deps.limits.checkKey(user.keyId));
  if (limited)
    return {
      error: limited,
      message: `${rateLimitWords(deps.limits.requestsPerKey)} for this key (the API's limit). Nothing was charged; try again in ${limited.extra.retryAfterSeconds} s.`,
    };
  if (user.access === 'read_only') {
    const error = readOnlyRefusal();
    return { error, message: error.message };
  }
  return undefined;
}

/**
 * The form's request in the account's request log, as the API logs a POST /v1/generations made
 * with the session's key: under its generation's id (or a request id), with the status and code
 * the API answers its refusal with (the ApiError's own), 202 when admitted.
 */
function requestLogger(deps: ConsoleRouteDeps, request: FastifyRequest, user: ConsoleUser) {
  const started = performance.now();
  return (requestId: string, refusal: ApiError | null) =>
    deps.requestLog.add(
      requestLogEntry(
        user,
        { requestId, method: 'POST', path: '/v1/generations', ip: request.ip, userAgent: 'account console' },
        {
          statusCode: refusal?.status ?? 202,
          errorCode: refusal?.code ?? null,
          durationMs: performance.now() - started,
        },
      ),
    );
}

/** Images do not change the price, and are not sent back into a re-rendered form. */
function withoutImages(values: Record<string, unknown>): Record<string, unknown> {
  const { images: _images, ...rest } = values;
  return Object.fromEntries(
    Object.entries(rest).filter(([, v]) => typeof v !== 'string' || !v.startsWith('data:')),
  );
}
