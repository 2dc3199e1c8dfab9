import { DefaultLogger, Runtime } from '@temporalio/worker';

// The SDK logs every worker state change at INFO; tests want only what went wrong.
Runtime.install({ logger: new DefaultLogger('WARN') });
