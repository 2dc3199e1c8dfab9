import { Client, Connection } from '@temporalio/client';
import { sql } from 'slonik';
import { z } from 'zod';
import { freePort } from '../src/dev/free-port.js';
import { requestIdOf } from '../src/providers/fal/fal-job-ids.js';
import { parseJobReference } from '../src/providers/job-reference.js';
import { scrape, type Scrape } from '../test/support/prometheus.js';
import { replicateLimits, type RequestKind } from '../test/support/providers/fake-rate-limits.js';
import { cpuBySource, type CpuSource } from './process-cpu.js';
import type { StandInName } from './provider-scale-child.js';
import {
  activitySlots,
  benchModels,
  post,
  waitForModels,
  offerBenchModels,
  peakRunning,
  startStandIn,
  total,
  type StandIn,
} from './provider-scale-support.js';
import { sampleHistories } from './provider-scale-histories.js';
import { printProviderScale, type PhaseResult } from './provider-scale-print.js';
import { startStack, type Stack } from './stack.js';
import { percentile } from './support.js';
import { loadAverage } from './targets.js';

/**
 * npm run bench:provider-scale — issue 47's measure: BENCH_JOBS (2,000) jobs of BENCH_JOB_SECONDS
 * (120) at each provider's stand-in (BENCH_PROVIDERS: replicate,fal; one after the other, on one
 * stack per mode), the Replicate stand-in enforcing Replicate's published limits (600 creates and
 * 3,000 other requests a minute), each stand-in in a process of its own and ending each job on its
 * own timer, counted from the create. Modes (BENCH_MODES: push,poll): `push`, with
 * PROVIDER_WEBHOOK_BASE_URL the API's origin (the stand-ins push signed webhooks), and `poll`, with
 * it unset (no webhook is ever sent; jobs are read every PROVIDER_POLL_INTERVAL_MS under the
 * request budget). POSTs go BENCH_SUBMIT_CONCURRENCY (16) at a time, so the jobs overlap, and at
 * most BENCH_SUBMIT_RATE a second when set (the rate at which the jobs then end). Prints,
 * per mode and provider: provider requests per job by kind besides the create, 429s, the stand-in's
 * end of job → `generation.succeeded` (completed_at) p50/p95, activity slots in use (the worker's
 * Temporal SDK metrics, sampled every second), CPU per generation by process, and Temporal history
 * events per generation (BENCH_HISTORY_SAMPLE generations, every run); then the issue's targets.
 */
type Mode = 'push' | 'poll';
const jobs = Number(process.env.BENCH_JOBS ?? 2_000);
const seconds = Number(process.env.BENCH_JOB_SECONDS ?? 120);
const providers = (process.env.BENCH_PROVIDERS ?? 'replicate,fal').split(',') as StandInName[];
const modes = (process.env.BENCH_MODES ?? 'push,poll').split(',') as Mode[];
const concurrency = Number(process.env.BENCH_SUBMIT_CONCURRENCY ?? 16);
/**
 * POSTs a second at most (unset: as fast as the concurrency goes). Jobs end D seconds after their
 * create, so this is also the rate at which they end: at N jobs of D seconds, N / D a second keeps
 * N running at once while the ends come no faster than the machine can finish them.
 */
const submitRate = process.env.BENCH_SUBMIT_RATE ? Number(process.env.BENCH_SUBMIT_RATE) : null;
const historySample = Number(process.env.BENCH_HISTORY_SAMPLE ?? 20);
/** Waiting generations whose workflows are described every 5 s (their pending activities counted). */
const describeSample = Number(process.env.BENCH_DESCRIBE_SAMPLE ?? 20);
/** A phase gives up once nothing has moved for this long past its jobs' run time. */
const stallMs = Number(process.env.BENCH_STALL_SECONDS ?? 300) * 1000;

const loadBefore = await loadAverage();
console.log(
  `provider scale: ${jobs} jobs × ${seconds} s per provider (${providers.join(', ')}), modes ${modes.join(', ')}; load average ${loadBefore}`,
);
const results: Array<{ mode: Mode; phases: PhaseResult[]; load: string }> = [];
for (const mode of modes) {
  const standIns = new Map<StandInName, StandIn>();
  for (const provider of providers)
    standIns.set(
      provider,
      await startStandIn(provider, {
        runMs: seconds * 1000,
        ...(provider === 'replicate' ? { limits: replicateLimits } : {}),
      }),
    );
  const [apiPort, metricsPort, sdkPort] = [await freePort(), await freePort(), await freePort()];
  const stack = await startStack(
    {
      ...Object.assign({}, ...[...standIns.values()].map((s) => s.env)),
      API_PORT: String(apiPort),
      // Blank is unset: no webhook URL is sent, so no push can come.
      PROVIDER_WEBHOOK_BASE_URL: mode === 'push' ? `http://127.0.0.1:${apiPort}` : '',
      REPLICATE_MAX_IN_FLIGHT: String(jobs * 2),
      FAL_MAX_IN_FLIGHT: String(jobs * 2),
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      // The creates that wait for Replicate's budget are logged as failed attempts (warnings), thousands of them.
      LOG_LEVEL: 'error',
      WORKER_METRICS_PORT: String(metricsPort),
      WORKER_TEMPORAL_METRICS_PORT: String(sdkPort),
    },
    { thumbnailWorker: true },
  );
  const connection = await Connection.connect({ address: stack.temporalAddress });
  const client = new Client({ connection });
  try {
    await offerBenchModels(stack.pool, providers, seconds);
    await waitForModels(stack, providers);
    const phases: PhaseResult[] = [];
    for (const provider of providers) {
      const standIn = standIns.get(provider)!;
      phases.push(
        await runPhase(stack, client, standIn, {
          ours: `http://127.0.0.1:${metricsPort}`,
          sdk: `http://127.0.0.1:${sdkPort}`,
        }),
      );
    }
    results.push({ mode, phases, load: await loadAverage() });
    printProviderScale(mode, jobs, seconds, phases, results.at(-1)!.load);
  } finally {
    await connection.close();
    await stack.stop();
    for (const standIn of standIns.values()) await standIn.close();
  }
}
console.log(`\nload average (1, 5, 15 min): ${loadBefore} at the start, ${await loadAverage()} at the end`);

async function runPhase(
  stack: Stack,
  client: Client,
  standIn: StandIn,
  metrics: { ours: string; sdk: string },
): Promise<PhaseResult> {
  const provider = standIn.name;
  const model = benchModels[provider].id;
  const processes: Record<string, CpuSource> = { ...stack.processes, 'stand-in': { pid: standIn.pid } };
  const before = {
    cpu: await cpuBySource(processes),
    ours: await scrape(metrics.ours),
    sdk: await scrape(metrics.sdk),
    standIn: await standIn.report(),
  };
  const started = Date.now();
  const ids: string[] = [];
  let submitted = 0;
  let submitSeconds = NaN;
  let submittedAt = Infinity;
  const submit = async () => {
    const runId = Date.now().toString(36);
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (submitted < jobs) {
          const i = submitted++;
          if (submitRate !== null) {
            const due = started + (i * 1000) / submitRate;
            if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
          }
          ids.push(await post(stack, model, `${runId}-${provider}-${i}`));
        }
      }),
    );
    submittedAt = Date.now();
    submitSeconds = (submittedAt - started) / 1000;
  };
  const samples: Array<{ at: number; slots: ReturnType<typeof activitySlots> }> = [];
  const counts = sql.type(z.object({ created: z.number(), ended: z.number() }))`
    SELECT count(*) FILTER (WHERE provider_job_id IS NOT NULL)::int AS created,
           count(*) FILTER (WHERE status <> 'queued')::int AS ended
    FROM generations WHERE model = ${model}`;
  // Jobs surely still running at the stand-in (created less than D − 5 s ago): what do their workflows hold?
  const waitingNow = sql.type(z.object({ workflow_id: z.string() }))`
    SELECT workflow_id FROM generations
    WHERE model = ${model} AND status = 'queued' AND provider_job_id IS NOT NULL AND workflow_id IS NOT NULL
      AND submit_sent_at > now() - make_interval(secs => ${Math.max(1, seconds - 5)})
    ORDER BY random() LIMIT ${describeSample}`;
  const described = { workflows: 0, pendingActivities: 0, most: 0 };
  const describeWaiting = async () => {
    for (const workflowId of await stack.pool.anyFirst(waitingNow)) {
      const pending =
        (await client.workflow.getHandle(workflowId).describe()).raw.pendingActivities?.length ?? 0;
      described.workflows++;
      described.pendingActivities += pending;
      described.most = Math.max(described.most, pending);
    }
  };
  const sample = async () => {
    let moved = { at: Date.now(), created: -1, ended: -1 };
    for (let tick = 1; ; tick++) {
      await new Promise((r) => setTimeout(r, 1000));
      samples.push({ at: Date.now(), slots: activitySlots(await scrape(metrics.sdk)) });
      if (tick % 5 === 0) await describeWaiting();
      const now = await stack.pool.one(counts);
      if (now.created !== moved.created || now.ended !== moved.ended) moved = { at: Date.now(), ...now };
      if (now.ended >= jobs) return;
      if (Date.now() - moved.at > seconds * 1000 + stallMs) {
        console.error(
          `  ${provider}: ${now.ended} of ${jobs} ended; nothing moved for ${(Date.now() - moved.at) / 1000} s, giving up`,
        );
        return;
      }
    }
  };
  await Promise.all([submit(), sample()]);
  const phaseSeconds = (Date.now() - started) / 1000;
  const after = {
    cpu: await cpuBySource(processes),
    ours: await scrape(metrics.ours),
    sdk: await scrape(metrics.sdk),
    standIn: await standIn.report(),
  };

  const rows = await stack.pool.any(sql.type(
    z.object({
      id: z.string(),
      status: z.string(),
      workflow_id: z.string().nullable(),
      provider_job_id: z.string().nullable(),
      completed_ms: z.number().nullable(),
    }),
  )`SELECT id, status, workflow_id, provider_job_id,
       (extract(epoch FROM completed_at) * 1000)::float8 AS completed_ms
     FROM generations WHERE id = ANY(${sql.array(ids, 'text')})`);
  const ends = new Map(after.standIn.jobs.map((job) => [job.id, job.endsAt]));
  // Our job reference names the stand-in's job: Replicate's prediction id, fal's `{model}::{request id}::…`.
  const endOf = (reference: string | null) => {
    if (!reference) return NaN;
    const { jobId } = parseJobReference(reference);
    return ends.get(provider === 'fal' ? (requestIdOf(jobId) ?? '') : jobId) ?? NaN;
  };
  const ended = rows.flatMap((row) =>
    // A job without a timer (a stand-in that ends jobs by polls) has no end to count from.
    row.status === 'succeeded' && Number.isFinite(endOf(row.provider_job_id)) && row.completed_ms !== null
      ? [{ ...row, endsAt: endOf(row.provider_job_id), completedMs: row.completed_ms }]
      : [],
  );
  const latencies = ended.map((row) => row.completedMs - row.endsAt);
  const other: Record<string, number> = {};
  for (const row of rows) if (row.status !== 'succeeded') other[row.status] = (other[row.status] ?? 0) + 1;

  const firstEnd = Math.min(...after.standIn.jobs.map((job) => job.endsAt));
  // Where a waiting job would hold a slot: a read (a local activity) or a wait on the waits' queue;
  // counted once every POST was answered (admission's local activities done), before any job ended.
  const waiting = (s: (typeof samples)[number]) => s.slots.reads + s.slots.waits;
  const all = (s: (typeof samples)[number]) => s.slots.reads + s.slots.activities;
  const delta = (name: string, labels: Record<string, string>) =>
    total(after.ours, name, labels) - total(before.ours, name, labels);
  const sdkDelta = (name: string, labels: Record<string, string>, s: { sdk: Scrape } = after) =>
    total(s.sdk, name, labels) - total(before.sdk, name, labels);
  const persist = { activity_type: 'persistResults' };
  const meanMs = (histogram: string, labels: Record<string, string> = {}) =>
    (1000 * sdkDelta(`${histogram}_sum`, labels)) / sdkDelta(`${histogram}_count`, labels);
  const kinds: RequestKind[] = ['create', 'status', 'result', 'cancel', 'file', 'other'];
  const perKind = (k: RequestKind) => (after.standIn.counts[k] - before.standIn.counts[k]) / jobs;
  const history = await sampleHistories(
    client,
    ended.flatMap((row) => (row.workflow_id ? [{ workflowId: row.workflow_id, endsAt: row.endsAt }] : [])),
    historySample,
  );
  return {
    provider,
    submitted: ids.length,
    succeeded: rows.filter((r) => r.status === 'succeeded').length,
    other,
    submitSeconds,
    phaseSeconds,
    peakRunning: peakRunning(
      after.standIn.jobs.map((job) => job.endsAt),
      seconds * 1000,
    ),
    perJob: Object.fromEntries(kinds.map((k) => [k, perKind(k)])) as Record<RequestKind, number>,
    perJobApi: after.standIn.perJob,
    throttled: kinds.reduce((n, k) => n + after.standIn.throttled[k] - before.standIn.throttled[k], 0),
    ourThrottled: delta('provider_throttled_total', { provider }),
    ourRequests: Object.fromEntries(
      ['create', 'status', 'result', 'cancel', 'probe'].map((kind) => [
        kind,
        delta('provider_requests_total', { provider, kind }) / jobs,
      ]),
    ),
    webhooks: {
      attempts: after.standIn.webhooks.attempts - before.standIn.webhooks.attempts,
      failed: after.standIn.webhooks.failed - before.standIn.webhooks.failed,
    },
    latency: { p50: percentile(latencies, 50), p95: percentile(latencies, 95), count: latencies.length },
    persistMs: meanMs('temporal_activity_execution_latency_seconds', persist),
    slots: {
      waitingBeforeFirstEnd: Math.max(
        -1,
        ...samples.filter((s) => s.at > submittedAt && s.at < firstEnd).map(waiting),
      ),
      waitingPeak: Math.max(0, ...samples.map(waiting)),
      allPeak: Math.max(0, ...samples.map(all)),
    },
    described,
    scheduleToStart: {
      workflowTask: meanMs('temporal_workflow_task_schedule_to_start_latency_seconds'),
      activity: meanMs('temporal_activity_schedule_to_start_latency_seconds'),
    },
    cpu: Object.fromEntries(
      Object.keys(processes).map((name) => [name, (after.cpu[name]! - before.cpu[name]!) / jobs]),
    ),
    history,
  };
}
