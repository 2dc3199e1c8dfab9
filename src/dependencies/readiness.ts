/** Longest a readiness check waits on one dependency. */
export const checkTimeoutMs = 2_000;

/** One dependency's part of a readiness answer: 'ok', or what went wrong (briefly). */
export async function readinessCheck(probe: () => Promise<unknown>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      probe(),
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${checkTimeoutMs} ms`)), checkTimeoutMs);
      }),
    ]);
    return 'ok';
  } catch (error) {
    return error instanceof Error ? error.message.slice(0, 200) : String(error);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The probes one server's readiness checks started. A check answers within checkTimeoutMs, but its
 * probe goes on until it ends: a Temporal call retries until its deadline (give it one). `settled()`
 * waits for those still running, for a server to call before it closes the connections they use:
 * a client retry that meets a closed gRPC channel throws where nothing can catch it.
 */
export class ReadinessProbes {
  private readonly running = new Set<Promise<unknown>>();

  check(probe: () => Promise<unknown>): Promise<string> {
    // A probe that throws at once is a failed check, like one that rejects.
    const started = Promise.resolve().then(probe);
    this.running.add(started);
    const forget = () => this.running.delete(started);
    started.then(forget, forget);
    return readinessCheck(() => started);
  }

  async settled(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}

/** A readiness answer from its checks: 200 when every one is 'ok', else 503. */
export function readiness(checks: Record<string, string>): {
  statusCode: 200 | 503;
  body: { status: 'ready' | 'not_ready'; checks: Record<string, string> };
} {
  const ready = Object.values(checks).every((value) => value === 'ok');
  return { statusCode: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', checks } };
}
