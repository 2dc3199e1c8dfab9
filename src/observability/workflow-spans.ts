import type { SpanContext } from '@opentelemetry/api';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from './tracing.js';

/** A finished workflow span as @temporalio/interceptors-opentelemetry 1.24 hands it over. */
type WorkflowSpan = Omit<ReadableSpan, 'instrumentationScope' | 'parentSpanContext'> & {
  instrumentationLibrary?: ReadableSpan['instrumentationScope'];
  instrumentationScope?: ReadableSpan['instrumentationScope'];
  parentSpanId?: string;
  parentSpanContext?: SpanContext;
};

/**
 * The span processor Temporal's workflow span exporter is given. Workflow spans are made inside the
 * workflow sandbox by the interceptors' own OpenTelemetry SDK, still 1.x in
 * @temporalio/interceptors-opentelemetry 1.24: they name their scope `instrumentationLibrary` and
 * their parent by `parentSpanId`. The 2.x SDK and OTLP exporter this process runs read
 * `instrumentationScope` and `parentSpanContext`; without them a workflow span would lose its
 * parent (its trace would break at the workflow) or fail the export. Each span is given the 2.x
 * names here, then handed to the process's own processor.
 */
export function workflowSpanProcessor(tracing: Tracing): Parameters<typeof makeWorkflowExporter>[0] {
  const processor: SpanProcessor = tracing.spanProcessor;
  const adapter: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => processor.onEnd(asCurrentSpan(span)),
    forceFlush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
  return adapter as unknown as Parameters<typeof makeWorkflowExporter>[0];
}

function asCurrentSpan(span: WorkflowSpan): ReadableSpan {
  const { instrumentationLibrary, parentSpanId, ...rest } = span;
  const context = span.spanContext();
  const parentSpanContext =
    span.parentSpanContext ??
    (parentSpanId
      ? { traceId: context.traceId, spanId: parentSpanId, traceFlags: context.traceFlags, isRemote: false }
      : undefined);
  return {
    ...rest,
    spanContext: () => context,
    instrumentationScope: span.instrumentationScope ?? instrumentationLibrary ?? { name: 'temporal' },
    ...(parentSpanContext ? { parentSpanContext } : {}),
  };
}
