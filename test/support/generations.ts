import type { ApplicationFailure } from '@temporalio/common';
import type { CommonQueryMethods } from 'slonik';
import { expect } from 'vitest';
import { settleDebit } from '../../src/activities/debit.js';
import type { ApiService } from '../../src/api/service.js';
import { newId } from '../../src/vocabulary/ids.js';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import { bearer, type TestAccount } from './api.js';

/** POST /v1/generations as a client would. */
export function createGeneration(api: ApiService, key: string, body: unknown, idempotencyKey?: string) {
  return api.app.inject({
    method: 'POST',
    url: '/v1/generations',
    headers: {
      ...bearer(key),
      'content-type': 'application/json',
      ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    },
    payload: JSON.stringify(body),
  });
}

export async function getGeneration(api: ApiService, key: string, id: string) {
  const response = await api.app.inject({
    method: 'GET',
    url: `/v1/generations/${id}`,
    headers: bearer(key),
  });
  if (response.statusCode !== 200) throw new Error(`GET ${id}: ${response.statusCode} ${response.body}`);
  return response.json();
}

/** Polls GET /v1/generations/{id} until `done` holds (every 50 ms, as a fast client would). */
export async function pollGeneration(
  api: ApiService,
  key: string,
  id: string,
  done: (g: Record<string, any>) => boolean = (g) => g.status !== 'queued',
  timeoutMs = 20_000,
): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const generation = await getGeneration(api, key, id);
    if (done(generation)) return generation;
    if (Date.now() > deadline) throw new Error(`generation ${id} still ${JSON.stringify(generation)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What the API would start a workflow with: a lumen-lite generation of the account's, with no Idempotency-Key. */
export function generationStart(owner: TestAccount, prompt: string): GenerationStart {
  const generationId = newId('gen');
  return {
    generationId,
    workflowId: `generation-${generationId}`,
    accountId: owner.accountId,
    apiKeyId: owner.keyId,
    model: 'lumen-lite',
    mediaType: 'image',
    input: { prompt },
    fingerprint: 'f',
    idempotencyKey: null,
    inputPrefix: null,
    createdAt: new Date().toISOString(),
    timing: {
      submitTimeoutMs: 3000,
      pollIntervalMs: 1000,
      resultRetentionMs: 60_000,
      idempotencyRetentionMs: 60_000,
    },
  };
}

/** What a step (an activity called directly) failed with, or null when it succeeded. */
export function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure | null> {
  return promise.then(
    () => null,
    (error: unknown) => error as ApplicationFailure,
  );
}

/** A generation of the account's admitted (debited) as the workflow's first step would: its start. */
export async function admittedStart(
  db: CommonQueryMethods,
  owner: TestAccount,
  prompt: string,
  overrides: Partial<GenerationStart> = {},
): Promise<GenerationStart> {
  const start = { ...generationStart(owner, prompt), ...overrides };
  expect((await settleDebit(db, start, 10)).outcome).toBe('accepted');
  return start;
}
