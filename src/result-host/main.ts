import { storageLocation } from '../config.js';
import { createLogger } from '../logger.js';
import { loadConfigOrExit, reportReady, runUntilSignal } from '../process.js';
import { openBucket } from '../storage/open-storage.js';
import { buildResultHost } from './server.js';

/** `npm run result-host`: serves stored results. Configured by environment variables only. */
const config = loadConfigOrExit();
const logger = createLogger('result-host', config.LOG_LEVEL);
const location = storageLocation(config);
const app = await buildResultHost(
  location.kind === 'folder'
    ? { storageDir: location.dir, logger }
    : { bucket: openBucket(location, config.RESULT_BASE_URL), logger },
);
await app.listen({ host: config.RESULT_HOST, port: config.RESULT_PORT });
logger.info(
  {
    url: config.RESULT_BASE_URL,
    storage: location.kind === 'folder' ? location.dir : `s3://${location.bucket}/${location.keyPrefix}`,
  },
  'result host listening',
);
runUntilSignal(logger, () => app.close());
reportReady();
