import { createLogger } from '../logger.js';
import { loadConfigOrExit, reportReady, runUntilSignal } from '../process.js';
import { createMetricsRegistry } from '../observability/metrics.js';
import { startMetricsServer } from '../observability/metrics-server.js';
import { buildResultHost } from './server.js';

/** `npm run result-host`: serves stored results. Configured by environment variables only. */
const config = loadConfigOrExit();
const logger = createLogger('result-host', config.LOG_LEVEL);
const registry = config.RESULT_METRICS_PORT === undefined ? undefined : createMetricsRegistry();
const app = await buildResultHost({ storageDir: config.STORAGE_DIR, logger, metrics: registry });
await app.listen({ host: config.RESULT_HOST, port: config.RESULT_PORT });
const metrics =
  registry &&
  (await startMetricsServer({
    host: config.METRICS_HOST,
    port: config.RESULT_METRICS_PORT!,
    registry,
    onError: (error) => logger.warn({ err: error }, 'metrics scrape failed'),
  }));
logger.info({ url: config.RESULT_BASE_URL, storageDir: config.STORAGE_DIR }, 'result host listening');
runUntilSignal(logger, async () => {
  await metrics?.close();
  await app.close();
});
reportReady();
