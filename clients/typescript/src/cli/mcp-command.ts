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
 * transport asks. Nothing but MCP messages goes to stdout: what goes wrong is said on stderr, and a
 * request that gets no answer from the API is answered with a JSON-RPC error saying why, so the
 * client never waits for a reply that will not come. Ends when stdin ends, once every answer is in.
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

  /** One message from the client, relayed; its answer written back (or an error in its place). */
  async function relay(line: string): Promise<void> {
    let message: JsonRpcMessage;
    try {
      message = JSON.parse(line) as JsonRpcMessage;
    } catch {
      write({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: not JSON.' } });
      return;
    }
    const isRequest = message.id !== undefined && typeof message.method === 'string';
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
      if (response.status === 202) return; // a notification or a response, taken
      for await (const answer of answersOf(response)) {
        if (message.method === 'initialize' && answer.id === message.id)
          protocolVersion = answer.result?.protocolVersion ?? protocolVersion;
        write(answer);
      }
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      io.stderr.write(`gen mcp: ${message.method ?? 'a message'} was not relayed: ${why}\n`);
      if (isRequest)
        write({ jsonrpc: '2.0', id: message.id, error: { code: -32603, message: `Not relayed: ${why}` } });
    }
  }

  const lines = createInterface({ input: io.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const relayed = relay(line).finally(() => inFlight.delete(relayed));
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
