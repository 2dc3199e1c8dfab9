import type { Client } from '@temporalio/client';
import { runsOf } from '../test/support/workflow-runs.js';
import { percentile } from './support.js';

/** What a sample of generations' histories say: their size, and where a job's end went to. */
export interface HistorySample {
  sampled: number;
  /** Events per generation, every run of its workflow id; runs per generation. */
  events: number;
  runs: number;
  /**
   * Medians, ms, from the stand-in's end of the job: to the push's signal in the history (the
   * stand-in's result and POST, the API's verification, the signal), from there (or, with no
   * signal, from the end) to persistResults scheduled (the read, two workflow tasks), its wait on
   * the queue, and its run (the result's download, its store, the success written).
   */
  stages: { toSignal: number; toPersistScheduled: number; persistQueued: number; persistRan: number };
}

type Event = NonNullable<Awaited<ReturnType<typeof runsOf>>[number]['history']['events']>[number];

const msOf = (event: Event | undefined) =>
  event?.eventTime ? Number(event.eventTime.seconds) * 1000 + (event.eventTime.nanos ?? 0) / 1e6 : NaN;

/** `size` generations spread over `generations` (each with its job's end at the stand-in), read from Temporal. */
export async function sampleHistories(
  client: Client,
  generations: ReadonlyArray<{ workflowId: string; endsAt: number }>,
  size: number,
): Promise<HistorySample> {
  const step = Math.max(1, Math.floor(generations.length / size));
  const sampled = generations.filter((_, i) => i % step === 0).slice(0, size);
  let [events, runs] = [0, 0];
  const stages = {
    toSignal: [] as number[],
    toPersistScheduled: [] as number[],
    persistQueued: [] as number[],
    persistRan: [] as number[],
  };
  for (const { workflowId, endsAt } of sampled) {
    const chain = await runsOf(client, workflowId);
    runs += chain.length;
    const all = chain.flatMap((run) => run.history.events ?? []);
    events += all.length;
    const signal = all.find(
      (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerJobEnded',
    );
    const scheduled = all.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'persistResults',
    );
    const id = String(scheduled?.eventId);
    const started = all.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === id);
    const completed = all.find(
      (e) => String(e.activityTaskCompletedEventAttributes?.scheduledEventId) === id,
    );
    if (signal) stages.toSignal.push(msOf(signal) - endsAt);
    stages.toPersistScheduled.push(msOf(scheduled) - (signal ? msOf(signal) : endsAt));
    // An activity's started event is written when it ends, with the time it started.
    stages.persistQueued.push(msOf(started) - msOf(scheduled));
    stages.persistRan.push(msOf(completed) - msOf(started));
  }
  const median = (values: number[]) => percentile(values.filter(Number.isFinite), 50);
  return {
    sampled: sampled.length,
    events: events / sampled.length,
    runs: runs / sampled.length,
    stages: {
      toSignal: median(stages.toSignal),
      toPersistScheduled: median(stages.toPersistScheduled),
      persistQueued: median(stages.persistQueued),
      persistRan: median(stages.persistRan),
    },
  };
}
