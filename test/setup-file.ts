import { DefaultLogger, IllegalStateError, Runtime } from '@temporalio/worker';

// The SDK logs every worker state change at INFO; tests want only what went wrong. Installed once
// per test process: the files that run after the first in the same process find it installed.
try {
  Runtime.install({ logger: new DefaultLogger('WARN') });
} catch (error) {
  if (!(error instanceof IllegalStateError)) throw error;
}
