import type { FastifyInstance } from 'fastify';
import { listGenerationsQuerySchema, pageOfGenerations } from '../../generations/list-query.js';
import { generationWorkflowId } from '../../db/console-reads.js';
import { getGeneration } from '../../db/generation-reads.js';
import { routeAttemptsOf } from '../../db/route-attempts.js';
import { generationStatuses } from '../../vocabulary/generation.js';
import type { GenerationProgress } from '../../workflows/generation-types.js';
import { progressQuery } from '../../workflows/generation-workflow.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';
import { webhookPageData } from './webhook-routes.js';

const PAGE = 25;

/** The generations list (the API's filters and cursor) and each generation with where its workflow stands. */
export function generationRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.get('/generations', async (request, reply) => {
    const { accountId } = userOf(request);
    const raw: Record<string, string> = Object.fromEntries(
      Object.entries(request.query as Record<string, unknown>).filter(
        (entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== '',
      ),
    );
    const parsed = listGenerationsQuerySchema.safeParse(raw);
    const query = parsed.success ? parsed.data : {};
    const { rows, nextCursor: next } = await pageOfGenerations(deps.db, {
      accountId,
      limit: query.limit ?? PAGE,
      statuses: query.status ?? null,
      model: query.model ?? null,
      after: query.cursor ?? null,
    });
    const keep = new URLSearchParams({
      ...(raw.status ? { status: raw.status } : {}),
      ...(raw.model ? { model: raw.model } : {}),
    });
    return sendPage(request, reply, 'generations', {
      title: 'Generations',
      rows,
      nextHref: next ? `/generations?${new URLSearchParams([...keep, ['cursor', next]]).toString()}` : null,
      filter: { status: raw.status ?? '', model: raw.model ?? '' },
      invalid: parsed.success ? null : 'Those filters are not valid; showing everything.',
      statuses: generationStatuses,
      models: deps.catalog.list().map((m) => m.entry.id),
      format,
    });
  });

  app.get<{ Params: { id: string }; Querystring: { redelivered?: string } }>(
    '/generations/:id',
    async (request, reply) => {
      const { accountId } = userOf(request);
      const row = await getGeneration(deps.db, accountId, request.params.id);
      if (!row) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
      const redelivered = request.query.redelivered;
      return sendPage(request, reply, 'generation', {
        title: row.id,
        g: row,
        progress: await progressOf(accountId, row.id),
        // Each route tried (issue 29): the provider, its job, and why the generation moved on.
        routeAttempts: await routeAttemptsOf(deps.db, row.id),
        // Its webhook's deliveries, and the notice after a redeliver (POST …/webhooks/redeliver).
        ...(await webhookPageData(deps.db, accountId, row.id)),
        redelivered: redelivered && /^\d{1,9}$/.test(redelivered) ? redelivered : null,
        format,
      });
    },
  );

  /** What the page's live status polls while the generation is queued. */
  app.get<{ Params: { id: string } }>('/generations/:id/state', async (request, reply) => {
    const { accountId } = userOf(request);
    const row = await getGeneration(deps.db, accountId, request.params.id);
    if (!row) return reply.code(404).send({ error: 'not_found' });
    const progress = row.status === 'queued' ? await progressOf(accountId, row.id) : null;
    return { status: row.status, step: progress?.step ?? null, credits: row.credits };
  });

  /** The workflow's own account of its step (a query); null when it has ended or cannot be asked now. */
  async function progressOf(accountId: string, id: string): Promise<GenerationProgress | null> {
    const workflowId = await generationWorkflowId(deps.db, accountId, id);
    if (!workflowId) return null;
    try {
      const progress = await deps.temporal.connection.withDeadline(Date.now() + 2000, () =>
        deps.temporal.workflow.getHandle(workflowId).query(progressQuery),
      );
      // A workflow held by an Idempotency-Key may run for a later generation than this one.
      return progress.generationId === id ? progress : null;
    } catch {
      return null;
    }
  }
}
