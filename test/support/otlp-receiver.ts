import http from 'node:http';

/** A span as an OTLP/HTTP exporter sent it, with the service that sent it. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  attributes: Record<string, unknown>;
}

/**
 * A stand-in for an OpenTelemetry collector we do not own: an OTLP/HTTP receiver on loopback that
 * takes `POST /v1/traces` in the JSON encoding (what @opentelemetry/exporter-trace-otlp-http
 * sends) and keeps the spans. A protobuf body is refused with 415, as a JSON-only receiver would.
 */
export class OtlpReceiver {
  private constructor(
    private readonly server: http.Server,
    readonly endpoint: string,
    readonly spans: ReceivedSpan[],
  ) {}

  static async start(): Promise<OtlpReceiver> {
    const spans: ReceivedSpan[] = [];
    const server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (request.method !== 'POST' || request.url !== '/v1/traces') {
          response.writeHead(404).end();
          return;
        }
        if (!String(request.headers['content-type']).startsWith('application/json')) {
          response.writeHead(415).end();
          return;
        }
        spans.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    return new OtlpReceiver(server, `http://127.0.0.1:${port}`, spans);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function attributesOf(list: Array<{ key: string; value: Record<string, unknown> }> = []) {
  return Object.fromEntries(list.map(({ key, value }) => [key, Object.values(value)[0]]));
}

/** An ExportTraceServiceRequest: resourceSpans → scopeSpans → spans, attributes as {key, value: {stringValue…}}. */
function spansOf(body: any): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const service = attributesOf(resourceSpans.resource?.attributes)['service.name'];
    for (const scopeSpans of resourceSpans.scopeSpans ?? [])
      for (const span of scopeSpans.spans ?? [])
        spans.push({
          service: String(service),
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId || undefined,
          name: span.name,
          attributes: attributesOf(span.attributes),
        });
  }
  return spans;
}
