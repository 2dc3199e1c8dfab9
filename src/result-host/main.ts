import { storageLocation } from '../config/service-config.js';
import { createLogger } from '../process/logger.js';
import { loadConfigOrExit, reportReady, runUntilSignal } from '../process/lifecycle.js';
import { openBucket } from '../storage/open-storage.js';
import { createMetricsRegistry } from '../observability/metrics.js';
import { startMetricsServer } from '../observability/metrics-server.js';
import { buildResultHost } from './server.js';

/** `npm run result-host`: serves stored results. Configured by environment variables only. */
const config = loadConfigOrExit();
const logger = createLogger('result-host', config.LOG_LEVEL);
const location = storageLocation(config);
const registry = config.RESULT_METRICS_PORT === undefined ? undefined : createMetricsRegistry();
const app = await buildResultHost(
  location.kind === 'folder'
    ? { storageDir: location.dir, logger, metrics: registry }
    : { bucket: openBucket(location, config.RESULT_BASE_URL), logger, metrics: registry },
);
await app.listen({ host: config.RESULT_HOST, port: config.RESULT_PORT });
const metrics =
  registry &&
  (await startMetricsServer({
    host: config.METRICS_HOST,
    port: config.RESULT_METRICS_PORT!,
    registry,
    onError: (error) => logger.warn({ err: error }, 'metrics scrape failed'),
  }));
logger.info(
  {
    url: config.RESULT_BASE_URL,
    storage: location.kind === 'folder' ? location.dir : `s3://${location.bucket}/${location.keyPrefix}`,
  },
  'result host listening',
);
runUntilSignal(logger, async () => {
  await metrics?.close();
  await app.close();
});
reportReady();
