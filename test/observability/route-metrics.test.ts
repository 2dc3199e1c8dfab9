import { beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { metricNames } from '../../src/observability/metrics.js';
import { promptContains } from '../support/providers/fake-http.js';
import { scrape, type Scrape } from '../support/prometheus.js';
import { useRoutedStack } from '../support/routed-stack.js';

const model = 'flux-schnell';

/**
 * Issue 29's metrics on a real worker process's port (WORKER_METRICS_PORT), scraped before and
 * after generations of catalog/examples/routed.json's flux-schnell on the fal and Replicate
 * stand-ins: route attempts by provider and outcome, failovers (from → to), served by provider.
 */
describe('route metrics', () => {
  let port = 0;
  // Registered before the stack's own beforeAll, which starts the worker on this port.
  beforeAll(async () => {
    port = await freePort();
  });
  const { stack, accepted, settled } = useRoutedStack({
    workerEnv: () => ({ WORKER_METRICS_PORT: String(port) }),
  });
  const metricsUrl = () => `http://127.0.0.1:${port}`;

  const delta = (before: Scrape, after: Scrape) => (name: string, labels: Record<string, string>) =>
    after.value(name, labels) - before.value(name, labels);

  it('counts each attempt once by outcome, each failover from → to, and who served', async () => {
    const before = await scrape(metricsUrl());

    // fal refuses (503) → Replicate serves.
    stack.fal.failCreate({ kind: 'status', status: 503 }, promptContains('metrics refused'));
    const refused = await accepted({ prompt: 'metrics refused' });
    // fal serves at once.
    const direct = await accepted({ prompt: 'metrics direct' });
    // Replicate first, its job aborted before it started → fal serves.
    stack.replicate.script(
      { pollsStarting: 1, pollsProcessing: 0, final: 'aborted' },
      promptContains('metrics aborted'),
    );
    const aborted = await accepted({ prompt: 'metrics aborted', provider: { order: ['replicate'] } });
    expect(await settled(refused.id as string)).toMatchObject({ status: 'succeeded', provider: 'replicate' });
    expect(await settled(direct.id as string)).toMatchObject({ status: 'succeeded', provider: 'fal' });
    expect(await settled(aborted.id as string)).toMatchObject({ status: 'succeeded', provider: 'fal' });

    const on = delta(before, await scrape(metricsUrl()));
    const attempts = (provider: string, outcome: string) =>
      on(metricNames.routeAttempts, { provider, outcome });
    expect(attempts('fal', 'not_accepted')).toBe(1);
    expect(attempts('fal', 'accepted')).toBe(2);
    expect(attempts('replicate', 'accepted')).toBe(2);
    expect(attempts('replicate', 'never_started')).toBe(1);
    expect(attempts('replicate', 'not_accepted')).toBe(0);
    expect(on(metricNames.routeFailovers, { model, from: 'fal', to: 'replicate' })).toBe(1);
    expect(on(metricNames.routeFailovers, { model, from: 'replicate', to: 'fal' })).toBe(1);
    expect(on(metricNames.generationsServed, { model, provider: 'fal' })).toBe(2);
    expect(on(metricNames.generationsServed, { model, provider: 'replicate' })).toBe(1);
    expect(on(metricNames.generationsSucceeded, { model })).toBe(3);
  });
});
