import { readOnlyRefusal } from '../../generations/key-rules.js';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CompiledModel } from '../../catalog/catalog-cache.js';
import { ApiError, ValidationError, errorCodes, type ErrorCode, type ValidationIssue } from '../../errors.js';
import { admitGeneration, GenerationRefused, quoteGeneration } from '../../generations/admit-generation.js';
import { newId } from '../../ids.js';
import { getBalance } from '../../db/credits-repository.js';
import { bodyFromForm, formFields } from '../playground-form.js';
import { judgeUploads } from '../playground-images.js';
import { UploadTooLarge, type StreamedForm } from '../uploads.js';
import { sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

/**
 * The playground: a form made from the model's published description, its price quoted before it
 * is sent, and a submission that goes through the API's own admission path (admitGeneration) on
 * behalf of the session's key. Each rendered form carries its own
 * Idempotency-Key, so a double click or a resubmitted form is one generation and one debit.
 */
export function playgroundRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
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
    extra: {
      values?: Record<string, unknown>;
      issues?: ValidationIssue[];
      message?: string | null;
      status?: number;
    },
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

  app.get<{ Querystring: { model?: string } }>('/playground', async (request, reply) => {
    const model = modelNamed(request.query.model);
    if (!model)
      return sendPage(
        request,
        reply,
        'error',
        { title: 'Playground', message: 'No models are available.' },
        503,
      );
    return show(request, reply, model, {});
  });

  /** The price of the form as it stands (the page's script asks as options change). */
  app.get<{ Querystring: Record<string, string> }>('/playground/quote', async (request) => {
    const model = modelNamed(request.query.model);
    if (!model) return { credits: null };
    const query = { ...request.query, prompt: 'x' } as Record<string, unknown>;
    const body = bodyFromForm(model.publicView, {
      field: (name) => (typeof query[name] === 'string' ? query[name] : undefined),
      images: () => [],
    });
    return { credits: await quote(body) };
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
        return await generate(request, reply, form);
      } finally {
        // Also when no answer was sent (an error the error handler answers after this).
        await form.discard();
      }
    },
  );

  const generate = async (request: FastifyRequest, reply: FastifyReply, form: StreamedForm) => {
    const user = userOf(request);
    const started = performance.now();
    // The generation is a request made with the session's key: it goes to the account's request log like the API's.
    const logRequest = (requestId: string, errorCode: string | null) =>
      deps.requestLog.add({
        accountId: user.accountId,
        apiKeyId: user.keyId,
        requestId,
        method: 'POST',
        path: '/v1/generations',
        statusCode: errorCode === null ? 202 : (errorCodes[errorCode as ErrorCode]?.status ?? 400),
        errorCode,
        ip: request.ip,
        userAgent: 'account console',
        durationMs: performance.now() - started,
        createdAtMs: Date.now(),
      });
    const firstModel = deps.catalog.list()[0];
    if (!firstModel) return reply.code(503).type('text/plain').send('No models are available.');
    if (form.refusal) return show(request, reply, firstModel, { message: form.refusal, status: 413 });
    const verdict = await deps.limits.checkKey(user.keyId);
    if (!verdict.allowed) {
      logRequest(newId('req'), 'rate_limited');
      reply.header('retry-after', String(verdict.retryAfterSeconds));
      const message = `Rate limit of ${deps.limits.requestsPerKey} requests per minute exceeded for this key (the API's limit). Nothing was charged; try again in ${verdict.retryAfterSeconds} s.`;
      return show(request, reply, firstModel, { message, status: 429 });
    }
    if (user.access === 'read_only') {
      logRequest(newId('req'), 'key_read_only');
      return show(request, reply, firstModel, { message: readOnlyRefusal().message, status: 403 });
    }
    try {
      await form.readAll();
    } catch (error) {
      if (!(error instanceof UploadTooLarge)) throw error;
      const named = deps.catalog.get(form.field('model') ?? '') ?? firstModel;
      return show(request, reply, named, { message: error.message, status: 413 });
    }
    const modelId = form.field('model');
    const model = modelId === undefined ? undefined : deps.catalog.get(modelId);
    if (!model) {
      // Never another model in its place: an unknown or retired one is refused, and nothing is charged.
      const message = `The model “${(modelId ?? '').slice(0, 100)}” is not available (unknown or retired), so nothing was generated or charged. Choose one of the models below.`;
      return show(request, reply, firstModel, { message, status: 400 });
    }
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
        {
          principal: user,
          idempotencyKey: form.field('idempotency_key'),
          body,
          recordInvalid: false,
          uploads,
        },
        request.log,
      );
    } catch (error) {
      // An invalid form is shown again with its issues beside the fields: no request was made.
      if (error instanceof ValidationError)
        return show(request, reply, model, { values: body, issues: error.extra.issues ?? [], status: 400 });
      if (!(error instanceof ApiError)) throw error;
      if (error instanceof GenerationRefused) {
        logRequest(error.generationId, error.code);
        const message =
          error.outcome === 'conflict'
            ? 'This form was already sent with other values. Reload the playground to start a new generation.'
            : error.message;
        return show(request, reply, model, { values: body, message, status: 409 });
      }
      logRequest(newId('req'), error.code);
      if (error.extra.retryAfterSeconds !== undefined)
        reply.header('retry-after', String(error.extra.retryAfterSeconds));
      return show(request, reply, model, { values: body, message: error.message, status: error.status });
    }
    logRequest(admitted.generationId, null);
    return reply.redirect(`/generations/${admitted.generationId}`, 303);
  };
}

/** Images do not change the price, and are not sent back into a re-rendered form. */
function withoutImages(values: Record<string, unknown>): Record<string, unknown> {
  const { images: _images, ...rest } = values;
  return Object.fromEntries(
    Object.entries(rest).filter(([, v]) => typeof v !== 'string' || !v.startsWith('data:')),
  );
}
