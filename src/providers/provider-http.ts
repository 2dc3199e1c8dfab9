import { Agent, buildConnector, fetch, type FormData, type Response } from 'undici';
import {
  refusal,
  unanswered,
  type CallKind,
  type NotAcceptedAnswer,
  type ProviderAnswer,
} from './provider-answers.js';
import type { RequestKind } from './request-budget.js';
import { inRequestTurn } from './request-turns.js';

/**
 * Plain HTTP to a provider's API, shared by the adapters. One call is one request: nothing here
 * retries, because none of the providers accepts an idempotency key and a resent create can start
 * (and bill) a second job. The workflow's retry policies do the retrying, knowing what was sent.
 *
 * What a failed call means (transient, uncertain, a rejection; whether it proves the job not
 * accepted) is decided in provider-answers.ts. Under a provider account's request budget
 * (budgetProvider, in the worker), each request first takes its turn (request-turns.ts): it may
 * wait, or fail before anything is sent (a throttled create then proves the job not accepted); a
 * 429 pauses the account for every worker.
 */

interface ProviderCall {
  method: 'GET' | 'POST' | 'PUT';
  url: string;
  headers: Record<string, string>;
  /** JSON (serialized here) or a ready body (FormData for multipart). */
  json?: unknown;
  body?: FormData;
  timeoutMs: number;
  /** What the request counts as in the request budget, when the Provider method does not say (a result read inside a status). */
  counts?: RequestKind;
}

/**
 * Errors of connections that were never made, as the connector reported them: a request that fails
 * with one of these was never written (undici hands the connector's error to the requests waiting
 * for that connection). An error of a connection that was made, whatever its code, is not here.
 */
const connectFailures = new WeakSet<object>();
const defaultConnector = buildConnector({});
/** undici's own connector (the same defaults as an Agent's), marking the errors of connections it could not make. */
const connect: buildConnector.connector = (options, callback) =>
  defaultConnector(options, (error, socket) => {
    if (error) {
      connectFailures.add(error);
      callback(error, null);
    } else callback(null, socket);
  });

/** Whether the call failed because its connection was never made (see connectFailures). */
function neverConnected(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    if (connectFailures.has(e)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Makes one call. Resolves with any 2xx answer (and, for reads, with 404 and other 4xx answers the
 * adapter interprets itself: `acceptStatuses`); rejects with the provider error class the failure
 * means for `kind` (provider-answers.ts). `provider` names the provider in messages (never the key).
 */
export async function callProvider(
  provider: string,
  kind: CallKind,
  call: ProviderCall,
  acceptStatuses: readonly number[] = [],
  /**
   * A 5xx answer this provider documents as "not accepted" on a create (the job was not taken and
   * is not billed), as its own answer (its error body or headers, not a proxy's page with the same
   * status): a transient failure that proves it (provesNotAccepted), not an uncertain one.
   */
  ownRefusal: NotAcceptedAnswer = () => false,
): Promise<ProviderAnswer> {
  // Nothing is sent before the budget gives this request its turn (or refuses it: nothing sent).
  return inRequestTurn(kind, call.method, call.counts, () =>
    send(provider, kind, call, acceptStatuses, ownRefusal),
  );
}

/** The request itself, in its turn. */
async function send(
  provider: string,
  kind: CallKind,
  call: ProviderCall,
  acceptStatuses: readonly number[],
  ownRefusal: NotAcceptedAnswer,
): Promise<ProviderAnswer> {
  let response: Response;
  try {
    response = await fetch(call.url, {
      dispatcher: dispatcherFor(call.timeoutMs),
      method: call.method,
      headers: {
        ...call.headers,
        ...(call.json !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: call.json !== undefined ? JSON.stringify(call.json) : call.body,
      redirect: 'error',
      signal: AbortSignal.timeout(call.timeoutMs),
    });
  } catch (error) {
    throw unanswered(provider, kind, error, call.timeoutMs, neverConnected(error));
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    // The answer started but did not arrive whole.
    throw unanswered(provider, kind, error, call.timeoutMs, neverConnected(error));
  }
  const body = parseJson(text);
  if ((response.status >= 200 && response.status < 300) || acceptStatuses.includes(response.status))
    return { status: response.status, headers: response.headers, body };
  const answer = { status: response.status, headers: response.headers, body };
  throw refusal(provider, kind, answer, body ?? text, ownRefusal);
}

/**
 * undici's default dispatcher gives up on an answer's headers after 300 s and on a silent body
 * after 300 s, whatever the call's own deadline: a 10-minute OpenAI call was cut at 5 minutes and
 * its (billed) answer lost. Each deadline gets a dispatcher whose timeouts are that deadline, so
 * the call's AbortSignal is the only clock. One per deadline, kept: connections are reused.
 */
const dispatchers = new Map<number, Agent>();
function dispatcherFor(timeoutMs: number): Agent {
  let agent = dispatchers.get(timeoutMs);
  if (!agent) {
    agent = new Agent({ headersTimeout: timeoutMs, bodyTimeout: timeoutMs, connect });
    dispatchers.set(timeoutMs, agent);
  }
  return agent;
}

/** Client errors that still prove the provider up: all but refused credentials and throttling. */
const answersOfAnUpProvider = Array.from({ length: 100 }, (_, i) => 400 + i).filter(
  (status) => ![401, 403, 429].includes(status),
);

/**
 * A provider's probe: one authenticated GET that proves it reachable and serving. Any answer below
 * 500 counts (a 404 for a request that does not exist is an answer), except a refusal of our
 * credentials; a refused connection, a timeout or a 5xx means it is still down.
 */
export async function probeProvider(
  provider: string,
  url: string,
  headers: Record<string, string>,
): Promise<void> {
  await callProvider(
    provider,
    'read',
    { method: 'GET', url, headers, timeoutMs: 10_000 },
    answersOfAnUpProvider,
  );
}

function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** How result files and reference images are fetched from the internet. */
export interface DownloadPolicy {
  /** Address ranges allowed though not public (OUTBOUND_ALLOW_CIDRS). */
  allowCidrs: readonly string[];
  /** Whether plain http URLs are fetched: only when the provider's own API is configured on http (a local stand-in). */
  allowHttp: boolean;
  /** Certificates (PEM) trusted besides the system's (an internal image mirror's; tests' own). */
  extraCa?: readonly string[];
}
