import { AsyncLocalStorage } from 'node:async_hooks';
import { ProviderThrottled } from './provider.js';
import type { ProviderBudget, RequestKind } from './request-budget.js';

/*
 * How a Provider method's requests take their turns in its account's budget (request-budget.ts):
 * budgetProvider (in the worker) runs each method under withBudget, and every request that method
 * makes through callProvider asks for its turn (inRequestTurn). Outside budgetProvider (an adapter
 * used on its own) nothing is counted.
 */

/** The Provider method a request is made for (set by budgetProvider around each call). */
export type ProviderMethod =
  'submit' | 'status' | 'fetchResult' | 'lookup' | 'cancel' | 'stopBeforeRun' | 'probe';

interface BudgetedCall {
  budget: ProviderBudget;
  method: ProviderMethod;
  /** A turn taken ahead for this call's first create (before the create was marked sent), or first read. */
  held: { create: boolean; read: boolean };
}

const calls = new AsyncLocalStorage<BudgetedCall>();

/** Runs one Provider method under `budget`: the requests it makes (callProvider) ask it for their turns. */
export function withBudget<T>(
  budget: ProviderBudget,
  method: ProviderMethod,
  run: () => Promise<T>,
  held: { create?: boolean; read?: boolean } = {},
): Promise<T> {
  return calls.run({ budget, method, held: { create: held.create ?? false, read: held.read ?? false } }, run);
}

/** What a read made by `method` counts as (`GET` and the rest: stopBeforeRun reads, then cancels). */
function readKind(method: ProviderMethod, httpMethod: string): RequestKind {
  switch (method) {
    case 'fetchResult':
      return 'result';
    case 'cancel':
      return 'cancel';
    case 'stopBeforeRun':
      return httpMethod === 'GET' ? 'status' : 'cancel';
    case 'probe':
      return 'probe';
    default:
      return 'status';
  }
}

/**
 * Asked by callProvider before each request: waits for the request's turn in the budget of the
 * Provider method running (none outside budgetProvider, e.g. an adapter used on its own), and says
 * what the request counts as. Throws as ProviderBudget.turn does.
 */
async function requestTurn(
  callKind: 'create' | 'read',
  httpMethod: string,
  counts?: RequestKind,
): Promise<RequestKind | undefined> {
  const call = calls.getStore();
  if (!call) return undefined;
  const kind = callKind === 'create' ? 'create' : (counts ?? readKind(call.method, httpMethod));
  const held = callKind === 'create' ? 'create' : 'read';
  if (call.held[held]) call.held[held] = false;
  else await call.budget.turn(kind, kind === 'create' ? 'create' : 'read');
  return kind;
}

/** Told by callProvider when a provider answers 429: the account pauses for every worker. */
async function providerThrottled(kind: RequestKind | undefined, retryAfterMs: number): Promise<void> {
  const call = calls.getStore();
  if (call && kind) await call.budget.throttled(kind, retryAfterMs);
}

/**
 * A create's turn taken now, ahead of the request (which then uses it): for an adapter that must
 * record a create as sent before making it (OpenAI's call row), so that the wait for the turn comes
 * before, and a refusal leaves nothing marked. Nothing outside budgetProvider.
 */
export async function takeCreateTurn(): Promise<void> {
  const call = calls.getStore();
  if (!call || call.held.create) return;
  await call.budget.turn('create', 'create');
  call.held.create = true;
}

/**
 * callProvider's budget hook: `send` runs once the request has its turn (nothing is sent before,
 * and nothing when the turn is refused), and a provider that answers it with 429 (ProviderThrottled)
 * pauses the account for every worker for its Retry-After before the error goes on.
 */
export async function inRequestTurn<T>(
  callKind: 'create' | 'read',
  httpMethod: string,
  counts: RequestKind | undefined,
  send: () => Promise<T>,
): Promise<T> {
  const counted = await requestTurn(callKind, httpMethod, counts);
  try {
    return await send();
  } catch (error) {
    if (error instanceof ProviderThrottled) await providerThrottled(counted, error.retryAfterMs ?? 0);
    throw error;
  }
}
