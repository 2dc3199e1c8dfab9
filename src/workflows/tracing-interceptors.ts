/**
 * Workflow interceptors for OpenTelemetry tracing, bundled with every workflow (see
 * src/worker/workflow-bundle.ts) and idle unless a workflow was started traced: the API, when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set, puts the POST's trace context in the start and update
 * headers. A workflow whose headers carry one runs under Temporal's OpenTelemetry interceptors
 * (a span for the run and for each activity it schedules, the context passed on in the activity's
 * headers); any other workflow, every recorded history among them, runs exactly as without this
 * module. The choice depends only on the headers, which are part of the history, so replay
 * decides the same way.
 *
 * The OpenTelemetry modules (some 150 of the bundle's 240) are loaded only when a traced header is
 * first seen: the worker instantiates a bundle's modules once per cached workflow, and loading them
 * for every workflow cost each one about 0.4 MB of the worker's memory and its first task the time
 * to evaluate them. `require` in this ES module is webpack's (see src/worker/workflow-bundle.ts).
 */
import type {
  Next,
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptorsFactory,
  WorkflowOutboundCallsInterceptor,
  WorkflowInternalsInterceptor,
} from '@temporalio/workflow';
import type { TRACE_HEADER as LibraryTraceHeader } from '@temporalio/interceptors-opentelemetry/lib/instrumentation.js';
import type * as OpenTelemetryWorkflow from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';

/** The library's header name, written out so that testing for it loads nothing (the type checks it is the same). */
const TRACE_HEADER: typeof LibraryTraceHeader = '_tracer-data';

/** The OpenTelemetry workflow interceptors' module, evaluated in this workflow on first use. */
function openTelemetryWorkflow(): typeof OpenTelemetryWorkflow {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy on purpose: see the module's comment
  return require('@temporalio/interceptors-opentelemetry/lib/workflow/index.js') as typeof OpenTelemetryWorkflow;
}

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
    if (!otel && TRACE_HEADER in headers) {
      const {
        OpenTelemetryInboundInterceptor,
        OpenTelemetryOutboundInterceptor,
        OpenTelemetryInternalsInterceptor,
      } = openTelemetryWorkflow();
      otel = {
        inbound: new OpenTelemetryInboundInterceptor(),
        outbound: new OpenTelemetryOutboundInterceptor(),
        internals: new OpenTelemetryInternalsInterceptor(),
      };
    }
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
