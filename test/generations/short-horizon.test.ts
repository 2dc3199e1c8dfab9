import { describe, expect, it } from 'vitest';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { workflowIdOf } from '../support/ledger.js';

/**
 * A fetch's status, its body read to the end: a body left unread holds its connection open, and the
 * result host's close() waited for it (about 70 s of the file's time in CI).
 */
const statusOf = async (url: string) => {
  const response = await fetch(url);
  await response.arrayBuffer();
  return response.status;
};

/** The same retention story on the dev server, with durations shortened by configuration. */
describe('expiry and the key horizon with short durations (dev server)', () => {
  // The horizon counts from creation: it leaves room for a slow generation and its expiry on a busy machine.
  const horizonMs = 12_000;
  const stack = useGenerationStack({
    apiEnv: { RESULT_RETENTION_MS: '1500', IDEMPOTENCY_RETENTION_MS: String(horizonMs) },
    account: { oneTime: 100 },
  });

  it('content expires, the key replays the expired generation, then after the horizon it starts a new one', async () => {
    const body = { model: 'lumen-lite', prompt: 'short-lived' };
    const first = await createGeneration(stack.api, stack.account.key, body, 'horizon-key');
    const id = first.json().id as string;
    const done = await pollGeneration(stack.api, stack.account.key, id);
    expect(done.status).toBe('succeeded');
    const url = done.output.images[0].url as string;
    expect(await statusOf(url)).toBe(200);

    const expired = await pollGeneration(
      stack.api,
      stack.account.key,
      id,
      (g) => g.content_expired === true,
      10_000,
    );
    expect(expired).toMatchObject({ status: 'succeeded', input: null, output: null, credits: 2 });
    expect(await statusOf(url)).toBe(404);
    const replay = await createGeneration(stack.api, stack.account.key, body, 'horizon-key');
    expect(replay.json()).toMatchObject({ id, content_expired: true });

    // The workflow ended with the content; the key's record holds the key until the horizon.
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
    await handle.result();
    expect((await createGeneration(stack.api, stack.account.key, body, 'horizon-key')).json().id).toBe(id);
    await new Promise((r) =>
      setTimeout(r, Date.parse(first.json().created_at as string) + horizonMs - Date.now()),
    );
    const fresh = await createGeneration(stack.api, stack.account.key, body, 'horizon-key');
    expect(fresh.statusCode).toBe(202);
    expect(fresh.json().id).not.toBe(id);
  }, 60_000);
});
