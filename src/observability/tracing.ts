import { context, propagation, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** A process's tracing: what Temporal's worker interceptors export workflow spans through, and the flush at exit. */
export interface Tracing {
  resource: Resource;
  spanProcessor: SpanProcessor;
  /** Sends what is buffered and stops; the process's global tracer, context and propagator are released. */
  shutdown(): Promise<void>;
}

/**
 * OpenTelemetry tracing to an OTLP/HTTP collector (`endpoint`, the value of
 * OTEL_EXPORTER_OTLP_ENDPOINT: spans go to `{endpoint}/v1/traces`, as JSON). Registers the
 * process's global tracer provider, with the W3C trace-context propagator and a context that
 * follows async calls, so that an incoming `traceparent` is continued and every span started
 * while handling a request (the Temporal client's among them) joins its trace. The exporter reads
 * its other settings (OTEL_EXPORTER_OTLP_HEADERS, timeouts) and the batch processor its own
 * (OTEL_BSP_SCHEDULE_DELAY) from the environment.
 */
export function startTracing(serviceName: string, endpoint: string): Tracing {
  const resource = resourceFromAttributes({ 'service.name': serviceName });
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, '')}/v1/traces` });
  const spanProcessor = new BatchSpanProcessor(exporter);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register();
  const shutdown = async () => {
    await provider.shutdown();
    // Released, so that a later start in this process (a test file after another) registers its own.
    trace.disable();
    context.disable();
    propagation.disable();
  };
  return { resource, spanProcessor, shutdown };
}
