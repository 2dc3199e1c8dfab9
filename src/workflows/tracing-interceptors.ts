/**
 * Workflow interceptors for OpenTelemetry tracing, bundled with every workflow (see
 * src/worker/workflow-bundle.ts) and idle unless a workflow was started traced: the API, when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set, puts the POST's trace context in the start and update
 * headers. A workflow whose headers carry one runs under Temporal's OpenTelemetry interceptors
 * (a span for the run and for each activity it schedules, the context passed on in the activity's
 * headers); any other workflow, every recorded history among them, runs exactly as without this
 * module. The choice depends only on the headers, which are part of the history, so replay
 * decides the same way.
 */
import type {
  Next,
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptorsFactory,
  WorkflowOutboundCallsInterceptor,
  WorkflowInternalsInterceptor,
} from '@temporalio/workflow';
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation.js';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';

type Inbound = Required<
  Pick<WorkflowInboundCallsInterceptor, 'execute' | 'handleUpdate' | 'validateUpdate' | 'handleSignal'>
>;
type Outbound = Required<
  Pick<WorkflowOutboundCallsInterceptor, 'scheduleActivity' | 'scheduleLocalActivity' | 'getLogAttributes'>
>;

export const interceptors: WorkflowInterceptorsFactory = () => {
  // This workflow's own: the OpenTelemetry interceptors, made when its first traced header is seen.
  let otel: {
    inbound: OpenTelemetryInboundInterceptor;
    outbound: OpenTelemetryOutboundInterceptor;
    internals: OpenTelemetryInternalsInterceptor;
  } | null = null;
  const traced = (headers: Record<string, unknown>) => {
    if (!otel && TRACE_HEADER in headers)
      otel = {
        inbound: new OpenTelemetryInboundInterceptor(),
        outbound: new OpenTelemetryOutboundInterceptor(),
        internals: new OpenTelemetryInternalsInterceptor(),
      };
    return otel;
  };

  const inbound: Inbound = {
    execute: (input, next) => traced(input.headers)?.inbound.execute(input, next) ?? next(input),
    handleUpdate: (input, next) => traced(input.headers)?.inbound.handleUpdate(input, next) ?? next(input),
    // A validator runs only for new updates, never on replay: it may not switch tracing on.
    validateUpdate: (input, next) =>
      otel && TRACE_HEADER in input.headers ? otel.inbound.validateUpdate(input, next) : next(input),
    handleSignal: (input, next) => traced(input.headers)?.inbound.handleSignal(input, next) ?? next(input),
  };
  const outbound: Outbound = {
    scheduleActivity: (input, next) => otel?.outbound.scheduleActivity(input, next) ?? next(input),
    scheduleLocalActivity: (input, next) => otel?.outbound.scheduleLocalActivity(input, next) ?? next(input),
    getLogAttributes: (input, next: Next<WorkflowOutboundCallsInterceptor, 'getLogAttributes'>) =>
      otel ? otel.outbound.getLogAttributes(input, next) : next(input),
  };
  const internals: WorkflowInternalsInterceptor = {
    dispose: (input, next) => {
      if (otel) void otel.internals.dispose(input, next);
      else next(input);
    },
  };
  return { inbound: [inbound], outbound: [outbound], internals: [internals] };
};
