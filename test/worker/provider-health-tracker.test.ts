import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../src/process/logger.js';
import { FalQueueProvider } from '../../src/providers/fal/fal-queue-provider.js';
import {
  ProviderRejection,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
} from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { trackHealth } from '../../src/worker/provider-health-tracker.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/** Which failed calls count against a provider's health (provider_health), and which do not. */
describe('counting a provider’s failures', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db?.drop());

  /** A provider whose every status call fails with `error`. */
  const failingWith = (name: string, error: Error) => {
    const provider = { status: () => Promise.reject(error) } as unknown as Provider;
    return trackHealth(
      name,
      provider,
      db.pool,
      { downAfter: 2, probeIntervalMs: 60_000 },
      createLogger('t', 'silent'),
    );
  };
  const healthOf = (name: string) =>
    db.pool.maybeOne(sql.type(z.object({ state: z.string(), consecutive_failures: z.number() }))`
      SELECT state, consecutive_failures FROM provider_health WHERE provider = ${name}`);

  it('refused connections and lost answers count, and take it down at the threshold', async () => {
    const unreachable = failingWith('p-unreachable', new ProviderTransientError('refused'));
    await expect(unreachable.status('j')).rejects.toThrow('refused');
    expect(await healthOf('p-unreachable')).toEqual({ state: 'up', consecutive_failures: 1 });
    const lost = failingWith('p-unreachable', new ProviderUncertainError('no answer'));
    await expect(lost.status('j')).rejects.toThrow('no answer');
    expect(await healthOf('p-unreachable')).toEqual({ state: 'down', consecutive_failures: 2 });
  });

  it('calls that never reach the provider’s API neither count nor wipe out failures that did', async () => {
    const provider = {
      submit: () => Promise.reject(new ProviderUncertainError('502 on create')),
      lookup: () => Promise.resolve({ found: 'unknown' }),
      cancel: () => Promise.resolve(),
      fetchResult: () => Promise.reject(new ProviderTransientError('file host hiccup')),
    } as unknown as Provider;
    const tracked = trackHealth(
      'p-lookups',
      provider,
      db.pool,
      { downAfter: 3, probeIntervalMs: 60_000 },
      createLogger('t', 'silent'),
    );
    await expect(tracked.submit({} as never)).rejects.toThrow('502');
    await tracked.lookup('tok');
    await tracked.cancel('j');
    await expect(tracked.fetchResult('j', 0, {} as never)).rejects.toThrow('hiccup');
    expect(await healthOf('p-lookups')).toEqual({ state: 'up', consecutive_failures: 1 });
    await expect(tracked.submit({} as never)).rejects.toThrow('502');
    await expect(tracked.submit({} as never)).rejects.toThrow('502');
    expect(await healthOf('p-lookups')).toEqual({ state: 'down', consecutive_failures: 3 });
  });

  it('throttling, rejections and an uncertainty from our own records do not count', async () => {
    for (const error of [
      new ProviderThrottled('slow down', 1_000),
      new ProviderRejection('bad input'),
      new ProviderUncertainError('our worker died mid-call', true),
    ])
      await expect(failingWith('p-quiet', error).status('j')).rejects.toBe(error);
    expect(await healthOf('p-quiet')).toBeNull();
  });

  it('our own storage failing while a submit is prepared is not the provider’s failure: fal stays up', async () => {
    // A store whose disk fails every read (EIO): the stored reference image cannot be inlined.
    const broken = new (class extends LocalStorage {
      override size(): Promise<number | null> {
        return Promise.reject(Object.assign(new Error('EIO: i/o error, stat'), { code: 'EIO' }));
      }
    })('/nonexistent-results', 'https://results.example.test');
    const creates: string[] = [];
    const fal = new FalQueueProvider({
      key: 'fal-key',
      // Never reached: a create would be refused by nobody listening and count as an outage.
      queueUrl: 'http://127.0.0.1:9',
      storage: broken,
      download: { allowCidrs: [], allowHttp: true },
    });
    const tracked = trackHealth(
      'fal-own-storage',
      { ...fal, submit: (job) => (creates.push(job.token), fal.submit(job)) } as Provider,
      db.pool,
      { downAfter: 5, probeIntervalMs: 60_000 },
      createLogger('t', 'silent'),
    );
    const ours = 'https://results.example.test/iAbc/images-0.png';
    const failures: unknown[] = [];
    for (let i = 0; i < 5; i++)
      await tracked
        .submit({
          token: `tok_${i}`,
          model: 'fal-flux-kontext-pro',
          mediaType: 'image',
          prompt: 'p',
          options: {},
          images: [ours],
          longEdgePx: 1024,
          target: {
            model: 'fal-ai/flux-pro/kontext',
            input: { prompt: 'p', image_url: ours },
            referenceFields: ['image_url'],
          },
        })
        .then(
          () => failures.push('submitted'),
          (error: unknown) => failures.push(error),
        );
    expect(creates).toHaveLength(5);
    const health = await healthOf('fal-own-storage');
    expect(health ?? { state: 'up', consecutive_failures: 0 }).toEqual({
      state: 'up',
      consecutive_failures: 0,
    });
  });
});
