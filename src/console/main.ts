import { createLogger } from '../process/logger.js';
import {
  loadConfigOrExit,
  reportReady,
  runUntilSignal,
  waitForDependenciesOrExit,
} from '../process/lifecycle.js';
import { createConsoleService } from './service.js';

/** `npm run console`: the account console, configured by the same environment variables as the API. */
const config = loadConfigOrExit();
const logger = createLogger('console', config.LOG_LEVEL);
await waitForDependenciesOrExit(config, logger, 'background');
const service = await createConsoleService(config, logger);
await service.app.listen({ host: config.CONSOLE_HOST, port: config.CONSOLE_PORT });
logger.info({ url: config.CONSOLE_PUBLIC_URL }, 'console listening');
runUntilSignal(logger, () => service.close());
reportReady();
