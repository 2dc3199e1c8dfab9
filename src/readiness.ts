/** Longest a readiness check waits on one dependency. */
const checkTimeoutMs = 2_000;

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

/** A readiness answer from its checks: 200 when every one is 'ok', else 503. */
export function readiness(checks: Record<string, string>): {
  statusCode: 200 | 503;
  body: { status: 'ready' | 'not_ready'; checks: Record<string, string> };
} {
  const ready = Object.values(checks).every((value) => value === 'ok');
  return { statusCode: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', checks } };
}
