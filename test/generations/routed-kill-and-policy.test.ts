import { sql, type DatabaseTransactionConnection } from 'slonik';
import { Client, Connection } from '@temporalio/client';
import { describe, expect, inject, it } from 'vitest';
import { supportCommands } from '../../src/admin/support-commands.js';
import { z } from 'zod';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import { bearer } from '../support/api.js';
import { exampleCatalog } from '../support/example-catalog.js';
import { createGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { useRoutedStack } from '../support/routed-stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 29, on catalog/examples/routed.json through the real API and worker processes: a worker
 * SIGKILLed between two routes creates on one only; a policy other than `order` end to end.
 */
describe('a routed model: a worker killed between routes, and the cheapest policy', () => {
  const { stack, post, settled, created, attempts } = useRoutedStack();

  it('a worker SIGKILLed after fal’s refusal is recorded and before the Replicate create → one job, one debit', async () => {
    // The next route's claim reads the catalog (models): held here, it waits once fal's end is recorded.
    let release: (() => void) | undefined;
    let locked: Promise<void> | undefined;
    stack.fal.failCreate({ kind: 'status', status: 503 }, promptContains('killed between'));
    stack.fal.beforeCreateAnswer = () => {
      stack.fal.beforeCreateAnswer = undefined;
      return new Promise<void>((answer) => {
        locked = stack.db.pool.transaction(async (tx: DatabaseTransactionConnection) => {
          await tx.query(sql.unsafe`LOCK TABLE models IN ACCESS EXCLUSIVE MODE`);
          answer();
          await new Promise<void>((resolve) => (release = resolve));
        });
      });
    };
    // The POST may answer 202 or, its worker gone mid-handover, 503: the generation is the same either way.
    const response = post({ prompt: 'killed between' });
    const id = await waitFor(async () => {
      const rows = await stack.db.pool.any(sql.type(z.object({ generation_id: z.string() }))`
        SELECT generation_id FROM route_attempts WHERE outcome = 'not_accepted' AND reason LIKE '%HTTP 503%'
          AND generation_id IN (SELECT id FROM generations WHERE input->>'prompt' = 'killed between')`);
      return rows[0]?.generation_id ?? null;
    }, 20_000);
    // Route 1's claim waits on the lock: the worker dies before its create.
    const claiming = await waitFor(async () => {
      const waiting = await stack.db.pool.anyFirst(sql.type(z.object({ pid: z.number() }))`
        SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%submit_claim%'`);
      return waiting[0] ?? null;
    }, 20_000);
    stack.worker.kill('SIGKILL');
    await new Promise((resolve) => stack.worker.once('exit', resolve));
    // Its statement dies with it (PostgreSQL would otherwise run it once the lock is free, and the
    // dead attempt's claim would hold the next one off for its window: the claim's own safety).
    await stack.db.pool.query(sql.unsafe`SELECT pg_terminate_backend(${claiming})`);
    expect(created(stack.replicate, 'killed between')).toBe(0);
    release!();
    await locked;
    stack.worker = await stack.workers.start();
    expect([202, 503]).toContain((await response).statusCode);
    const done = await settled(id);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'succeeded', provider: 'replicate' });
    expect(created(stack.fal, 'killed between')).toBe(0);
    expect(created(stack.replicate, 'killed between')).toBe(1);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await attempts(id)).toEqual([
      ['fal', 'not_accepted'],
      ['replicate', 'accepted'],
    ]);
    // Support sees the attempts: the provider, the job, the outcome and why it moved on.
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const shown = await supportCommands.generation!.run(
        { db: stack.db.pool, temporal: () => Promise.resolve(new Client({ connection })) },
        { id },
        [],
      );
      const lines = shown.text.filter((line) => line.startsWith('  route '));
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(/^ {2}route 0: fal not_accepted \(.*HTTP 503.*\) at /);
      expect(lines[1]).toMatch(/^ {2}route 1: replicate accepted job replicate:\S+ at /);
    } finally {
      await connection.close();
    }
  }, 120_000);

  it('cheapest, end to end: the route that costs us least serves first (Replicate here), fal untouched', async () => {
    const [routed] = await exampleCatalog('routed');
    const definition = {
      ...routed!.definition,
      routing: { policy: 'cheapest' as const },
      routes: [
        { ...routed!.definition.routes![0]!, cost: { usd: 0.004 } },
        { ...routed!.definition.routes![1]!, cost: { usd: 0.002 } },
      ],
    };
    await importCatalog(stack.db.pool, 'cheapest.json', [
      { label: 'cheapest', id: 'flux-schnell-cheapest', sort_order: 51, active: true, definition },
    ]);
    await waitFor(async () => {
      const models = await stack.api.app.inject({
        method: 'GET',
        url: '/v1/models',
        headers: bearer(stack.account.key),
      });
      return models
        .json<{ data: Array<{ id: string }> }>()
        .data.some((m) => m.id === 'flux-schnell-cheapest');
    });
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'flux-schnell-cheapest',
      prompt: 'cheapest first',
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json<{ id: string }>().id;
    expect(await settled(id)).toMatchObject({ status: 'succeeded', provider: 'replicate' });
    expect(created(stack.fal, 'cheapest first')).toBe(0);
    expect(await attempts(id)).toEqual([['replicate', 'accepted']]);
  });
});
