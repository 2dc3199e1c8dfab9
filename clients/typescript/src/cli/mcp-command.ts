import { createInterface } from 'node:readline';
import { sseMessages } from '../core/sse.js';
import { clientVersion } from '../version.js';
import type { Io } from './run-command.js';

/**
 * `gen mcp`: the service's MCP server for a desktop client that starts its servers as commands
 * (MCP's stdio transport). Nothing of the service runs here: each JSON-RPC message the client writes
 * to stdin (one per line) is POSTed to the API's Streamable HTTP endpoint, `{base URL}/mcp`, with
 * the user's key, and every message the answer carries (one JSON body, or an event stream of
 * progress notifications ending with the response) is written to stdout, one per line. The tools,
 * their schemas and the tasks are the remote server's, so this command never falls behind it.
 *
 * Requests are relayed concurrently (a long create_generation does not hold a tools/list behind it);
 * the protocol version the server chose at initialize is sent on every later request, as the
 * transport asks. Nothing but MCP messages goes to stdout: what goes wrong is said on stderr, and
 * every request gets one answer: one the API did not answer (it refused its line whole, as it does
 * a batch, or was never reached) is answered with a JSON-RPC error saying why, and a line that is
 * not JSON-RPC (`null`) with -32600, so the client never waits for a reply that will not come.
 * Ends when stdin ends, once every answer is in.
 */
export async function mcpCommand(
  remote: { apiKey: string; baseURL: string; fetch?: typeof fetch },
  io: Pick<Io, 'stdin' | 'stdout' | 'stderr'>,
): Promise<number> {
  const endpoint = `${remote.baseURL.replace(/\/+$/, '')}/mcp`;
  const send = remote.fetch ?? fetch;
  let protocolVersion: string | undefined;
  const inFlight = new Set<Promise<void>>();
  const write = (message: unknown) => io.stdout.write(JSON.stringify(message) + '\n');

  /**
   * One line from the client (a message, or a batch of them), relayed; its answers written back.
   * Every request in it gets exactly one answer: what the API did not answer (the line was refused
   * whole, as a batch is, or never reached it) is answered here with a JSON-RPC error saying why.
   */
  async function relay(line: string): Promise<void> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      write({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: not JSON.' } });
      return;
    }
    const messages = Array.isArray(parsed) ? parsed : [parsed];
    const requests = messages.filter(isRequest);
    const waiting = new Set(requests.map((request) => request.id));
    if (messages.length === 0 || !messages.every(isMessage)) {
      // Not JSON-RPC (`null`, a number, an empty batch): answered here, never sent.
      const invalid = { code: -32600, message: 'Invalid Request: not a JSON-RPC message.' };
      for (const id of waiting.size > 0 ? waiting : [null]) write({ jsonrpc: '2.0', id, error: invalid });
      return;
    }
    const initializeIds = new Set(requests.filter((r) => r.method === 'initialize').map((r) => r.id));
    const what = messages.length > 1 ? `a batch of ${messages.length}` : (messages[0]!.method ?? 'a message');
    /** Why the requests left unanswered were not: the API's error for the line as a whole, or ours. */
    let unanswered: { code: number; message: string } = {
      code: -32603,
      message: 'Not relayed: the API gave no answer to this request.',
    };
    try {
      const response = await send(endpoint, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${remote.apiKey}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'user-agent': `gen-mcp/${clientVersion}`,
          ...(protocolVersion ? { 'mcp-protocol-version': protocolVersion } : {}),
        },
        body: line,
      });
      // 202: notifications or responses, taken (a request among them stays unanswered: said below).
      const answers = response.status === 202 ? [] : answersOf(response);
      for await (const answer of answers) {
        const id = answer.id;
        if (id !== undefined && id !== null && waiting.delete(id)) {
          if (initializeIds.has(id)) protocolVersion = answer.result?.protocolVersion ?? protocolVersion;
        } else if (id === null && answer.error && waiting.size > 0) {
          // The line refused as a whole (a batch, say): said to each request it carried, by its id.
          unanswered = answer.error;
          continue;
        }
        write(answer);
      }
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      io.stderr.write(`gen mcp: ${what} was not relayed: ${why}\n`);
      unanswered = { code: -32603, message: `Not relayed: ${why}` };
    }
    for (const id of waiting) write({ jsonrpc: '2.0', id, error: unanswered });
  }

  const lines = createInterface({ input: io.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    // Nothing a line holds may end the relay: the client would wait on every other request.
    const relayed = relay(line)
      .catch((error: unknown) => void io.stderr.write(`gen mcp: a line was not relayed: ${String(error)}\n`))
      .finally(() => inFlight.delete(relayed));
    inFlight.add(relayed);
  }
  await Promise.all(inFlight);
  return 0;
}

interface JsonRpcMessage {
  jsonrpc?: string;
  id?: string | number | null;
  method?: string;
  result?: { protocolVersion?: string };
  error?: { code: number; message: string };
}

/** A JSON-RPC message's shape, loosely: an object (a request, a notification or a response). */
function isMessage(value: unknown): value is JsonRpcMessage {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A request: a message with a method and an id (string or number), which expects one answer. */
function isRequest(value: unknown): value is JsonRpcMessage & { id: string | number; method: string } {
  return (
    isMessage(value) &&
    typeof value.method === 'string' &&
    (typeof value.id === 'string' || typeof value.id === 'number')
  );
}

/**
 * The JSON-RPC messages of an answer: its event stream's, or its JSON body's (one message or a
 * batch; an error status with a JSON-RPC body is the server's answer too). Any other answer (the
 * API's own error envelope, a proxy's page) throws, saying its status and message.
 */
async function* answersOf(response: Response): AsyncGenerator<JsonRpcMessage> {
  const type = response.headers.get('content-type') ?? '';
  if (response.ok && type.includes('text/event-stream') && response.body) {
    for await (const event of sseMessages(response.body))
      if (event.data) yield JSON.parse(event.data) as JsonRpcMessage;
    return;
  }
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const messages = (Array.isArray(body) ? body : [body]) as JsonRpcMessage[];
  if (body !== undefined && messages.every((m) => m?.jsonrpc === '2.0')) {
    yield* messages;
    return;
  }
  const envelope = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
  const detail = envelope?.message ? `${envelope.code}: ${envelope.message}` : text.slice(0, 300);
  const hint =
    response.status === 401 ? ' (check the API key: --api-key, GENERATION_API_KEY or gen login)' : '';
  throw new Error(`HTTP ${response.status}${detail ? ` ${detail}` : ''}${hint}`);
}
