import { createLogger } from '../logger.js';
import { loadConfigOrExit, reportReady, runUntilSignal } from '../process.js';
import { buildResultHost } from './server.js';

/** `npm run result-host`: serves stored results. Configured by environment variables only. */
const config = loadConfigOrExit();
const logger = createLogger('result-host', config.LOG_LEVEL);
const app = await buildResultHost({ storageDir: config.STORAGE_DIR, logger });
await app.listen({ host: config.RESULT_HOST, port: config.RESULT_PORT });
logger.info({ url: config.RESULT_BASE_URL, storageDir: config.STORAGE_DIR }, 'result host listening');
runUntilSignal(logger, () => app.close());
reportReady();
