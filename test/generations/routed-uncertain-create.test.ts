import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { useRoutedStack } from '../support/routed-stack.js';

/**
 * Issue 35, item 5: a route is left only on the provider's own proof that it did not take the job.
 * A connection that fails after the create was written, and a 503 a proxy answers after forwarding
 * it, prove nothing: fal may have the job, and a create on the next route would be a second one.
 * The worker reaches the fal stand-in through a TCP relay that can cut a connection.
 */
describe('a routed create whose fate is unknown stays on its route', () => {
  let cutNext = false;
  const { stack, accepted, settled, created, attempts } = useRoutedStack({
    falRelay: {
      // The next connection made is reset once the answer's first byte is back: fal has read the
      // create whole and taken the job, the worker hears a reset.
      cut: () => (cutNext ? { direction: 'answer', afterBytes: 1 } : undefined),
      onCut: () => {
        cutNext = false;
      },
    },
  });
  const inReview = (id: string) =>
    stack.db.pool.oneFirst(sql.type(z.object({ needs_review: z.boolean() }))`
      SELECT needs_review FROM generations WHERE id = ${id}`);

  /** Sent to fal, which took it; its fate unknown to us: review, one debit, nothing sent to Replicate. */
  const expectKeptOnFal = async (id: string, prompt: string) => {
    expect(await settled(id)).toMatchObject({ status: 'failed', credits_refunded: false, provider: 'fal' });
    expect(await inReview(id)).toBe(true);
    expect(created(stack.fal, prompt)).toBe(1);
    expect(created(stack.replicate, prompt)).toBe(0);
    expect(await attempts(id)).toEqual([]);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  };

  it('the connection cut after the create was written → no second job at Replicate', async () => {
    cutNext = true;
    const generation = await accepted({ prompt: 'cut after writing' });
    await expectKeptOnFal(generation.id as string, 'cut after writing');
    expect(cutNext).toBe(false);
  });

  it('a proxy’s 503 page after it forwarded the create → no second job at Replicate', async () => {
    stack.fal.failCreate(
      {
        kind: 'raw',
        status: 503,
        contentType: 'text/html',
        body: '<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>',
        accepted: true,
      },
      promptContains('proxy 503'),
    );
    const generation = await accepted({ prompt: 'proxy 503' });
    await expectKeptOnFal(generation.id as string, 'proxy 503');
  });

  it('a connection refused (nothing sent) still moves on to Replicate', async () => {
    await stack.falRelay!.close();
    const generation = await accepted({ prompt: 'relay refused' });
    expect(await settled(generation.id as string)).toMatchObject({
      status: 'succeeded',
      provider: 'replicate',
    });
    expect(created(stack.replicate, 'relay refused')).toBe(1);
    expect(await attempts(generation.id as string)).toEqual([
      ['fal', 'not_accepted'],
      ['replicate', 'accepted'],
    ]);
  });
});
