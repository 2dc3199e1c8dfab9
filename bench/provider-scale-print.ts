import type { RequestKind } from '../test/support/providers/fake-rate-limits.js';
import type { StandInName, StandInReport } from './provider-scale-child.js';
import type { HistorySample } from './provider-scale-histories.js';
import { printTargets, type Target } from './targets.js';

/** What one phase (a provider in a mode) measured: what bench/provider-scale.ts prints. */
export interface PhaseResult {
  provider: StandInName;
  submitted: number;
  succeeded: number;
  other: Record<string, number>;
  submitSeconds: number;
  phaseSeconds: number;
  peakRunning: number;
  /** Stand-in requests by kind per job, and refusals. */
  perJob: Record<RequestKind, number>;
  perJobApi: { mean: number; max: number };
  throttled: number;
  /** provider_throttled_total and provider_requests_total{kind} of our worker, over the phase. */
  ourThrottled: number;
  ourRequests: Record<string, number>;
  webhooks: StandInReport['webhooks'];
  latency: { p50: number; p95: number; count: number };
  persistMs: number;
  /**
   * Peaks of the slots sampled: reads and waits (local activities, the waits' queue) between the
   * last POST's answer and the first job's end (-1: no sample fell there), over the phase, and every
   * activity slot.
   */
  slots: { waitingBeforeFirstEnd: number; waitingPeak: number; allPeak: number };
  /** describe() of waiting generations' workflows during the phase: how many, their pending activities, the most one had. */
  described: { workflows: number; pendingActivities: number; most: number };
  /** Mean schedule-to-start of workflow tasks and of activities over the phase (the worker's SDK metrics), ms. */
  scheduleToStart: { workflowTask: number; activity: number };
  cpu: Record<string, number>;
  history: HistorySample;
}

/** Provider requests allowed besides the create, push on: 3 for a job of up to a minute, one more per 30 s beyond. */
export const allowedRequests = (jobSeconds: number) => 3 + Math.max(0, Math.ceil((jobSeconds - 60) / 30));

const f = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '–');

/** One mode's table, a column per provider, then the issue's targets for it. */
export function printProviderScale(
  mode: 'push' | 'poll',
  jobs: number,
  seconds: number,
  phases: PhaseResult[],
  load: string,
): void {
  const row = (label: string, cell: (p: PhaseResult) => string) => [label, ...phases.map(cell)];
  const besides = (p: PhaseResult) =>
    p.perJob.status + p.perJob.result + p.perJob.cancel + p.perJob.file + p.perJob.other;
  const rows: string[][] = [
    ['', ...phases.map((p) => p.provider)],
    row('jobs succeeded / submitted', (p) => `${p.succeeded}/${p.submitted}`),
    row(
      '  not succeeded, by status',
      (p) =>
        Object.entries(p.other)
          .map(([status, n]) => `${status} ${n}`)
          .join(', ') || '0',
    ),
    row('POSTs took / phase took, s', (p) => `${f(p.submitSeconds, 0)} / ${f(p.phaseSeconds, 0)}`),
    row('most jobs running at the stand-in at once', (p) => String(p.peakRunning)),
    row('provider requests per job, by kind (stand-in):', () => ''),
    row('  create', (p) => f(p.perJob.create, 2)),
    row('  status', (p) => f(p.perJob.status, 2)),
    row('  result', (p) => f(p.perJob.result, 2)),
    row('  cancel', (p) => f(p.perJob.cancel, 2)),
    row('  file download', (p) => f(p.perJob.file, 2)),
    row('  other (webhook keys, probes)', (p) => f(p.perJob.other, 3)),
    row('  besides the create, mean', (p) => f(besides(p), 2)),
    row(
      '  naming one job (status, result, cancel): mean / max',
      (p) => `${f(p.perJobApi.mean, 2)} / ${p.perJobApi.max}`,
    ),
    row('our provider_requests_total per job: create/status/result', (p) =>
      [p.ourRequests.create, p.ourRequests.status, p.ourRequests.result].map((n) => f(n ?? NaN, 2)).join('/'),
    ),
    row('429s sent by the stand-in / provider_throttled_total', (p) => `${p.throttled} / ${p.ourThrottled}`),
    row('webhooks POSTed / not answered 2xx', (p) => `${p.webhooks.attempts} / ${p.webhooks.failed}`),
    row(
      'end of job → generation.succeeded, p50 / p95 ms',
      (p) => `${f(p.latency.p50, 0)} / ${f(p.latency.p95, 0)}`,
    ),
    row('  persistResults (download + store), mean ms', (p) => f(p.persistMs, 0)),
    row('  medians of a sample: end → push signalled', (p) => f(p.history.stages.toSignal, 0)),
    row('    signalled (or end) → persistResults scheduled', (p) =>
      f(p.history.stages.toPersistScheduled, 0),
    ),
    row(
      '    persistResults queued / ran',
      (p) => `${f(p.history.stages.persistQueued, 0)} / ${f(p.history.stages.persistRan, 0)}`,
    ),
    row(
      'workflow task / activity schedule-to-start, mean ms',
      (p) => `${f(p.scheduleToStart.workflowTask, 0)} / ${f(p.scheduleToStart.activity, 0)}`,
    ),
    row(
      'waiting jobs described: workflows / pending activities',
      (p) => `${p.described.workflows} / ${p.described.pendingActivities}`,
    ),
    row('activity slots in use, peak of 1 s samples:', () => ''),
    row('  reads and waits, every POST answered, no job ended yet', (p) =>
      p.slots.waitingBeforeFirstEnd < 0 ? 'no such time' : String(p.slots.waitingBeforeFirstEnd),
    ),
    row('  reads and waits, whole phase', (p) => String(p.slots.waitingPeak)),
    row('  every activity and local activity, whole phase', (p) => String(p.slots.allPeak)),
    row('CPU ms per generation:', () => ''),
    ...['worker', 'temporal', 'api', 'postgres', 'thumbnails', 'stand-in'].map((name) =>
      row(`  ${name}`, (p) => f(p.cpu[name] ?? NaN)),
    ),
    row(
      'Temporal history events per generation (runs)',
      (p) => `${f(p.history.events)} (${f(p.history.runs, 1)})`,
    ),
  ];
  console.log(
    `\n${mode}: ${jobs} jobs × ${seconds} s per provider; ${mode === 'push' ? 'PROVIDER_WEBHOOK_BASE_URL = the API (signed webhooks)' : 'no PROVIDER_WEBHOOK_BASE_URL (no webhook; reads every 2 s under the budget)'}; Replicate stand-in at 600 creates + 3,000 requests a minute; load ${load}`,
  );
  for (const cells of rows)
    console.log(cells.map((c, i) => (i === 0 ? c.padEnd(56) : c.padStart(16))).join(''));
  console.log(
    `  (history events over ${phases.map((p) => `${p.history.sampled} ${p.provider}`).join(', ')} generations, every run)`,
  );

  const targets: Target[] = phases.flatMap((p): Target[] => {
    const noThrottle: Target = {
      label: `${p.provider}: 429s received at ${jobs} jobs`,
      value: p.throttled + p.ourThrottled,
      kind: 'max',
      target: 0,
      unit: 'count',
      detail: `stand-in ${p.throttled}, provider_throttled_total ${p.ourThrottled}`,
    };
    if (mode === 'poll')
      return [
        {
          label: `${p.provider}: every job ends (succeeded)`,
          value: p.succeeded,
          kind: 'min',
          target: jobs,
          unit: 'count',
        },
        noThrottle,
      ];
    return [
      {
        label: `${p.provider}: provider requests besides the create, the job that needed most (${seconds} s jobs)`,
        value: p.perJobApi.max + p.perJob.file,
        kind: 'max',
        target: allowedRequests(seconds),
        unit: 'count',
        detail: `${p.perJobApi.max} naming the job + ${f(p.perJob.file, 2)} file downloads per job; mean ${f(besides(p), 2)} of every kind`,
      },
      noThrottle,
      {
        label: `${p.provider}: end of job → generation.succeeded p50, ≤ 300 ms + the result's download and store`,
        value: p.latency.p50,
        kind: 'max',
        target: 300 + p.persistMs,
        unit: 'ms',
        detail: `persistResults mean ${f(p.persistMs, 0)} ms; p95 ${f(p.latency.p95, 0)} ms over ${p.latency.count}`,
      },
      {
        label: `${p.provider}: activity slots held by waiting jobs (pending activities of waiting generations, described)`,
        value: p.described.workflows > 0 ? p.described.pendingActivities : NaN,
        kind: 'max',
        target: 0,
        unit: 'count',
        detail: `${p.described.workflows} descriptions of generations whose job was running; local activities and waits' slots in use once every POST was answered and before the first end: ${p.slots.waitingBeforeFirstEnd < 0 ? 'no such time' : p.slots.waitingBeforeFirstEnd}; every slot at peak ${p.slots.allPeak} while ${p.peakRunning} jobs ran at once at most`,
      },
    ];
  });
  printTargets(`targets, ${mode}:`, targets);
}
