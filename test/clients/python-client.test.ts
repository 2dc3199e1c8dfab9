import { setKeyRules } from '../../src/db/key-limits.js';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPaidAccount } from '../support/api.js';
import { useListeningBatchStack } from '../client/client-stack.js';
import { newWebhookSecret, signWebhook } from '../../src/net/webhook-signing.js';
import {
  installBuiltWheel,
  mustRun,
  pythonClientDir,
  removeScratch,
  runCommand,
  uvEnv,
  uvPath,
} from './python-tools.js';

const openApiCopy = path.join(pythonClientDir, 'openapi.json');

/** Generations the paging account holds: rows of the projection
 * as the API writes them (created_at in milliseconds), in runs of three that share a created_at. */
const seeded = 250;

describe('the Python client, built and installed as a wheel, against the real stack', () => {
  // Batches wired in the worker: tests/test_batches.py drives them.
  const stack = useListeningBatchStack({
    account: { oneTime: 1000 },
    worker: { simDelayMs: 300 },
    // Keep-alives within a second, as within a long wait's last 15 s: a wait on the stream must end
    // at its deadline although each keep-alive starts its next read afresh (test_wait_events.py).
    // Two lines of a batch in flight: a cancel meets lines not started (tests/test_batches.py).
    apiEnv: { EVENT_STREAM_KEEPALIVE_MS: '250', BATCH_LINES_IN_FLIGHT: '2' },
  });
  let installed: Awaited<ReturnType<typeof installBuiltWheel>> | undefined;
  let pagingKey = '';

  beforeAll(async () => {
    // Generations to page through, made in one statement: 250 creates would take the run's time.
    const paging = await createPaidAccount(stack.db.pool);
    pagingKey = paging.key;
    // Its key is held to rules of its own (tests/test_key.py): nothing a day, lumen-lite only.
    await setKeyRules(stack.db.pool, paging.keyId, {
      spend_limit: 0,
      limit_reset: 'daily',
      models: ['lumen-lite'],
    });
    await stack.db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, input, error, created_at)
      SELECT 'gen_pypage' || lpad(i::text, 4, '0'), ${paging.accountId}, ${paging.keyId}, 'rejected',
             'lumen-lite', 'image', jsonb_build_object('prompt', 'page ' || i),
             '{"code":"insufficient_credits","message":"seeded"}'::jsonb,
             date_trunc('milliseconds', now()) - make_interval(secs => i / 3)
      FROM generate_series(1, ${seeded}) AS i`);
    installed = await installBuiltWheel();
  }, 300_000);
  afterAll(() => removeScratch(installed?.scratch));

  it('uv build makes a wheel and an sdist', () => {
    expect(installed!.artifacts).toEqual([
      expect.stringMatching(/^generation_service_client-[\d.]+-py3-none-any\.whl$/),
      expect.stringMatching(/^generation_service_client-[\d.]+\.tar\.gz$/),
    ]);
  });

  it('the committed openapi.json is the live GET /v1/openapi.json (refresh: UPDATE_PYTHON_OPENAPI=1)', async () => {
    const live = (await stack.api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    delete live.servers; // the address of one deployment
    const fresh = `${JSON.stringify(live, null, 2)}\n`;
    if (process.env.UPDATE_PYTHON_OPENAPI === '1') await writeFile(openApiCopy, fresh);
    expect(await readFile(openApiCopy, 'utf8'), 'clients/python/openapi.json is stale').toBe(fresh);
  });

  it('pytest, run from the installed wheel: every scenario passes with Client and AsyncClient', async () => {
    const junit = path.join(installed!.scratch, 'junit.xml');
    const webhookFixtures = path.join(installed!.scratch, 'webhook-fixtures.json');
    await writeFile(webhookFixtures, JSON.stringify(await signedDeliveries(pagingKey)));
    const ran = await runCommand(
      path.join(installed!.venv, 'bin', 'pytest'),
      ['-p', 'no:cacheprovider', '-q', '--durations=8', `--junitxml=${junit}`, 'tests'],
      {
        env: {
          ...uvEnv(),
          GENERATION_BASE_URL: stack.listening.baseURL,
          GENERATION_API_KEY: stack.account.key,
          GENERATION_PAGING_API_KEY: pagingKey,
          GENERATION_WEBHOOK_FIXTURES: webhookFixtures,
          GENERATION_CLIENT_FROM_WHEEL: '1',
        },
      },
    );
    console.log(ran.output.trim().split('\n').slice(-12).join('\n'));
    expect(ran.code, ran.output).toBe(0);
    const report = await readFile(junit, 'utf8');
    const count = (name: string) => Number(new RegExp(`<testsuite [^>]*${name}="(\\d+)"`).exec(report)?.[1]);
    // Nothing skipped: a scenario that found no stack would pass by skipping.
    expect({ failures: count('failures'), errors: count('errors'), skipped: count('skipped') }).toEqual({
      failures: 0,
      errors: 0,
      skipped: 0,
    });
    expect(count('tests')).toBeGreaterThanOrEqual(90);
  }, 240_000);

  /**
   * Deliveries signed by the service's own signer (src/webhook-signing.ts), one with a single
   * secret and one as after a rotation (two signatures), over a real event's bytes: the Python
   * client's webhooks.verify and the reference implementation must both accept them.
   */
  async function signedDeliveries(key: string) {
    const answer = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/generations/gen_pypage0001/events',
      headers: { authorization: `Bearer ${key}` },
    });
    const event = answer.json<{ data: { id: number }[] }>().data.at(-1);
    if (!event) throw new Error(`no event to sign: ${answer.body}`);
    const body = JSON.stringify(event);
    const timestamp = Math.floor(Date.now() / 1000);
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
    return [
      { name: 'one secret', secrets: [current] },
      { name: 'rotated', secrets: [current, previous] },
    ].map(({ name, secrets }) => ({
      name,
      secrets,
      body,
      headers: signWebhook({ id: `msg_${name.replace(' ', '_')}`, timestamp, body }, secrets),
    }));
  }

  it('ruff and pyright (strict) find nothing', async () => {
    const uv = await uvPath();
    await mustRun(uv, ['sync', '--frozen', '--python', 'python3']);
    await mustRun(uv, ['run', '--frozen', 'ruff', 'check', '.']);
    await mustRun(uv, ['run', '--frozen', 'ruff', 'format', '--check', '.']);
    expect(await mustRun(uv, ['run', '--frozen', 'pyright'])).toContain('0 errors');
  }, 120_000);
});
