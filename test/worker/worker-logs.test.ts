import { Writable } from 'node:stream';
import { ApplicationFailure } from '@temporalio/common';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { temporalLogSink } from '../../src/worker/temporal-runtime.js';

describe("the SDK's logs in our JSON log", () => {
  it('carry a failed activity’s error message, type and stack, not {}; the activity-only worker is no warning', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const log = temporalLogSink(pino({ name: 'worker' }, sink));
    const failure = ApplicationFailure.nonRetryable('provider said no', 'ProviderRejection');
    log({
      level: 'WARN',
      message: 'Activity failed',
      timestampNanos: 0n,
      meta: { activityType: 'submit', attempt: 2, error: failure },
    });
    log({ level: 'INFO', message: 'Worker state changed', timestampNanos: 0n, meta: { state: 'RUNNING' } });
    log({
      level: 'WARN',
      message: 'No workflows registered, not polling for workflow tasks',
      timestampNanos: 0n,
      meta: { taskQueue: 'generations.provider-waits' },
    });

    const [failed, state, activityOnly] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(failed).toMatchObject({
      level: 40,
      msg: 'Activity failed',
      activityType: 'submit',
      attempt: 2,
      err: { message: 'provider said no', type: 'ApplicationFailure' },
    });
    expect((failed!.err as { stack: string }).stack).toContain('provider said no');
    expect(failed).not.toHaveProperty('error');
    expect(state).toMatchObject({ level: 30, msg: 'Worker state changed', state: 'RUNNING' });
    expect(state).not.toHaveProperty('err');
    // The provider-wait worker runs no workflows on purpose: that is news, not a warning.
    expect(activityOnly).toMatchObject({ level: 30, taskQueue: 'generations.provider-waits' });
  });
});
