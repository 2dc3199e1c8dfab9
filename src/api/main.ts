import { createLogger } from '../process/logger.js';
import {
  loadConfigOrExit,
  reportReady,
  runUntilSignal,
  waitForDependenciesOrExit,
} from '../process/lifecycle.js';
import { createApiService } from './service.js';

/** `npm run api`: the HTTP API, configured by environment variables only. */
const config = loadConfigOrExit();
const logger = createLogger('api', config.LOG_LEVEL);
await waitForDependenciesOrExit(config, logger, 'background');
const service = await createApiService(config, logger);
await service.app.listen({ host: config.API_HOST, port: config.API_PORT });
logger.info({ url: config.API_PUBLIC_URL }, 'API listening');
runUntilSignal(logger, () => service.close());
reportReady();
