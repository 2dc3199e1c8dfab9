import type { Config } from '../config/service-config.js';

/** How long `npm start` lets each of its processes stop after Ctrl-C before it kills it. */
export const childStopGraceMs = 15_000;

/**
 * What `npm start` sets that production does not (unless set already): webhooks to a receiver on
 * the developer's own machine, over plain http (WEBHOOK_ALLOW_LOOPBACK_HTTP).
 */
export function developmentDefaults(env: NodeJS.ProcessEnv): void {
  env.WEBHOOK_ALLOW_LOOPBACK_HTTP ??= 'true';
}

/** The banner's line on where webhooks may go, when that is more than production allows. */
export function webhookBannerLine(config: Config): string | null {
  if (!config.WEBHOOK_ALLOW_LOOPBACK_HTTP) return null;
  return (
    'Webhooks:       receivers on loopback are taken over plain http too, e.g. http://localhost:3000/hook ' +
    '(development: WEBHOOK_ALLOW_LOOPBACK_HTTP=true; production takes public HTTPS only)'
  );
}

/** The banner's lines for each Prometheus endpoint whose port is set, `[label, url]`. */
export function metricsEndpoints(config: Config): Array<[string, string]> {
  // Listening on every address (0.0.0.0, ::) is reachable on loopback, which is what to print.
  const host = ['0.0.0.0', '::'].includes(config.METRICS_HOST)
    ? '127.0.0.1'
    : config.METRICS_HOST.includes(':')
      ? `[${config.METRICS_HOST}]`
      : config.METRICS_HOST;
  const url = (port: number) => `http://${host}:${port}/metrics`;
  const ports: Array<[string, number | undefined]> = [
    ['API metrics', config.METRICS_PORT],
    ['Worker metrics', config.WORKER_METRICS_PORT],
    ['Worker SDK metrics', config.WORKER_TEMPORAL_METRICS_PORT],
    ['Result metrics', config.RESULT_METRICS_PORT],
  ];
  return ports.flatMap(([label, port]) => (port === undefined ? [] : [[label, url(port)]]));
}

/**
 * Why a process is still running after Ctrl-C: the API and the result host close at once; the
 * worker lets what it is running finish, and that can take a while.
 */
export function stillStoppingReason(name: string, config: Config): string {
  const killedAfter = `${childStopGraceMs / 1000} s`;
  if (name === 'worker') {
    const grace = Math.min(config.WORKER_SHUTDOWN_GRACE_MS, childStopGraceMs) / 1000;
    return (
      `the worker has stopped polling and lets the activities in flight finish (a provider wait lasts ` +
      `until the provider is done), up to ${grace} s; past ${killedAfter} it is killed, and Temporal ` +
      `retries those activities at the next start (Ctrl-C again stops everything at once)`
    );
  }
  return `${name} is closing its connections; past ${killedAfter} it is killed (Ctrl-C again stops everything at once)`;
}
