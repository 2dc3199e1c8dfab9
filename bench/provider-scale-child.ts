/**
 * One provider stand-in (Replicate or fal: test/support/providers/) for bench/provider-scale.ts, in
 * a process of its own, so that the bench's own event loop (its submissions, its samples) and the
 * stand-in's (thousands of jobs' timers, reads, pushes and result files) do not slow each other.
 * Every unscripted job ends `runMs` after its create (the stand-in's timer), and pushes its end
 * when the create carried a webhook URL. `limits`: the request rates it enforces (429 past them).
 * Started by `startStandIn` (provider-scale-support.ts) with the provider's name as its argument
 * and its options in PROVIDER_SCALE_CHILD; over IPC it sends `{ ready, env }`, then answers
 * `report` with what it received.
 */
import type { FakeProvider } from '../test/support/providers/fake-http.js';
import type { RateLimits, RequestKind, RequestLimiter } from '../test/support/providers/fake-rate-limits.js';
import { FalQueueServer } from '../test/support/providers/fal-queue-server.js';
import { ReplicateServer } from '../test/support/providers/replicate-server.js';

export type StandInName = 'replicate' | 'fal';

export interface StandInOptions {
  runMs: number;
  limits?: RateLimits;
}

export interface StandInReport {
  /** Requests received by kind, and of those the ones refused with 429. */
  counts: Record<RequestKind, number>;
  throttled: Record<RequestKind, number>;
  /** Every job it holds: its id and when its timer ended it (ms since the epoch). */
  jobs: Array<{ id: string; endsAt: number }>;
  /** API requests naming one job (its status, result, cancel; its create excepted), over its jobs. */
  perJob: { mean: number; max: number };
  /** Webhook POSTs made (retries included) and those not answered 2xx. */
  webhooks: { attempts: number; failed: number };
}

type StandIn = FakeProvider<unknown> & {
  env(): Record<string, string>;
  limiter: RequestLimiter;
  defaultRunMs: number | undefined;
  webhooks: { attempts: Array<{ status: number | null }> };
  accepted(): Array<{ id: string; endsAt?: number }>;
};

const name = process.argv[2] as StandInName;
const options = JSON.parse(process.env.PROVIDER_SCALE_CHILD ?? '{}') as StandInOptions;

/** The job a request names: Replicate's `/v1/predictions/{id}[/cancel]`, fal's `…/requests/{id}[/status|/cancel]`. */
const jobOf: Record<StandInName, RegExp> = {
  replicate: /^\/v1\/predictions\/([^/?]+)/,
  fal: /^\/[^/]+\/[^/]+\/requests\/([^/?]+)/,
};

async function main(): Promise<void> {
  const fake = (name === 'replicate'
    ? await ReplicateServer.start({ limits: options.limits })
    : await FalQueueServer.start({ limits: options.limits })) as unknown as StandIn;
  fake.defaultRunMs = options.runMs;

  process.on('message', (message: { id: number; type: 'report' }) => {
    const jobs = fake.accepted().map(({ id, endsAt }) => ({ id, endsAt: endsAt ?? NaN }));
    const perJob = new Map(jobs.map(({ id }) => [id, 0]));
    for (const request of fake.requests) {
      const id = jobOf[name].exec(request.url)?.[1];
      if (id !== undefined && perJob.has(id)) perJob.set(id, perJob.get(id)! + 1);
    }
    const counts = [...perJob.values()];
    const attempts = fake.webhooks.attempts;
    const report: StandInReport = {
      counts: fake.limiter.counts,
      throttled: fake.limiter.throttled,
      jobs,
      perJob: {
        mean: counts.reduce((a, b) => a + b, 0) / Math.max(1, counts.length),
        max: Math.max(0, ...counts),
      },
      webhooks: {
        attempts: attempts.length,
        failed: attempts.filter((a) => a.status === null || a.status < 200 || a.status > 299).length,
      },
    };
    process.send!({ id: message.id, report });
  });
  // The bench gone takes this process with it.
  process.on('disconnect', () => process.exit(0));
  process.send!({ ready: true, env: fake.env() });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
