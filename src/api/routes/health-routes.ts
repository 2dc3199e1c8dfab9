import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { FastifyInstance } from 'fastify';
import { sql, type CommonQueryMethods } from 'slonik';
import { checkTimeoutMs, readiness, ReadinessProbes } from '../../dependencies/readiness.js';

// A CommonJS package: its named exports are reached through the default one.
const { TaskQueueKind, TaskQueueType } = proto.temporal.api.enums.v1;

export interface HealthDeps {
  db: CommonQueryMethods;
  temporal: Client;
  taskQueue: string;
}

/**
 * GET /healthz (the process is alive) and GET /readyz (it can serve: PostgreSQL answers, Temporal
 * answers, and a worker polls the task queue, so a POST would be picked up). Both public and out
 * of the request log, which records only requests made with a key; readiness answers 503 naming
 * what is missing, for a load balancer to take the replica out.
 */
export function healthRoutes(app: FastifyInstance, deps: HealthDeps): void {
  app.get('/healthz', { config: { public: true } }, (_request, reply) => reply.send({ status: 'ok' }));

  // Temporal's client retries an unanswered call in the background until its deadline: the server
  // closes (and then the connection) once no probe is left.
  const probes = new ReadinessProbes();
  app.addHook('onClose', () => probes.settled());
  app.get('/readyz', { config: { public: true } }, async (_request, reply) => {
    const [postgres, temporal] = await Promise.all([
      probes.check(() => deps.db.query(sql.unsafe`SELECT 1`)),
      probes.check(() =>
        deps.temporal.connection.withDeadline(Date.now() + checkTimeoutMs, () => workerPolling(deps)),
      ),
    ]);
    const { statusCode, body } = readiness({ postgres, temporal });
    return reply.code(statusCode).send(body);
  });
}

/** Temporal answers, and at least one worker polls the generations' task queue. */
async function workerPolling(deps: HealthDeps): Promise<void> {
  const { pollers } = await deps.temporal.workflowService.describeTaskQueue({
    namespace: deps.temporal.options.namespace,
    taskQueue: { name: deps.taskQueue, kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  if (!pollers?.length) throw new Error(`no worker polls task queue ${deps.taskQueue}`);
}
