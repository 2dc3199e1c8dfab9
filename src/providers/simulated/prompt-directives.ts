/**
 * Directives in a prompt that drive the simulated provider down every path.
 * Only the simulated provider honours them; real providers see plain text.
 *
 * - `[sim:fail]`           the job fails later (generation_failed, refunded)
 * - `[sim:reject]`         the provider rejects the submit outright (refunded)
 * - `[sim:uncertain]`      the provider takes the job but the submit's answer is lost, and it
 *                          cannot say afterwards whether it has it (needs review)
 * - `[sim:uncertain=recoverable]`  the answer is lost, but a lookup finds the job (it goes on)
 * - `[sim:slow=SECONDS]`   the job takes that long instead of the configured delay
 * - `[sim:persist-fail=N]` the first N downloads of a result fail (persistence recovery)
 * - `[sim:unreachable]`    every submit fails before it reaches the provider (connection refused)
 * - `[sim:queued=SECONDS]` the job waits in the provider's queue that long before it runs; one
 *                          canceled while queued never runs and is not billed
 */
export interface SimDirectives {
  fail: boolean;
  reject: boolean;
  uncertain: false | 'unresolvable' | 'recoverable';
  slowSeconds: number | null;
  persistFailures: number;
  unreachable: boolean;
  queuedSeconds: number;
  /** Set on the stored job (not from the prompt) when a cancel stopped it in the queue. */
  canceled?: boolean;
}

const pattern = /\[sim:([a-z-]+)(?:=([^\]]*))?\]/g;

export function parseSimDirectives(prompt: string): SimDirectives {
  const directives: SimDirectives = {
    fail: false,
    reject: false,
    uncertain: false,
    slowSeconds: null,
    persistFailures: 0,
    unreachable: false,
    queuedSeconds: 0,
  };
  for (const [, name, value] of prompt.matchAll(pattern)) {
    switch (name) {
      case 'fail':
        directives.fail = true;
        break;
      case 'reject':
        directives.reject = true;
        break;
      case 'uncertain':
        directives.uncertain = value === 'recoverable' ? 'recoverable' : 'unresolvable';
        break;
      case 'slow':
        directives.slowSeconds = Math.max(0, Number(value) || 0);
        break;
      case 'unreachable':
        directives.unreachable = true;
        break;
      case 'queued':
        directives.queuedSeconds = Math.max(0, Number(value) || 0);
        break;
      case 'persist-fail':
        directives.persistFailures = Math.max(0, Math.floor(Number(value) || 0));
        break;
    }
  }
  return directives;
}

/** The prompt without directives, for rendering. */
export function stripSimDirectives(prompt: string): string {
  return prompt.replace(pattern, '').replace(/\s+/g, ' ').trim();
}
