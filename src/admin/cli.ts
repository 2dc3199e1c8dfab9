import { CatalogFileRefused } from '../catalog/catalog-file.js';
import { KeyCreationRefused } from '../db/api-keys-repository.js';
import { NotFound } from '../db/accounts-repository.js';
import { createDatabasePool } from '../db/pool.js';
import { loadAdminConfig } from '../config/service-config.js';
import { readDevState } from '../process/dev-state.js';
import { loadOrExit } from '../process/lifecycle.js';
import { temporalConnectionOptions } from '../temporal/connection-options.js';
import { Client, Connection, WorkflowUpdateFailedError } from '@temporalio/client';
import type { AdminContext } from './command.js';
import { CommandRefused, UsageError } from './command.js';
import { runAdminCommand, usage } from './commands.js';

/**
 * `npm run admin -- <command>`. Uses DATABASE_URL, or the database of the
 * development service that `npm start` is running.
 */
const argv = process.argv.slice(2);
const json = argv.includes('--json');
if (argv[0] === 'help' || argv[0] === '--help') {
  process.stdout.write(`${usage()}\n`);
  process.exit(0);
}
if (argv.length === 0) {
  // No command is a usage mistake (exit 2), answered with what the commands are.
  process.stderr.write(`${usage()}\n`);
  process.exit(2);
}
const config = loadOrExit(() => loadAdminConfig());
const databaseUrl = config.DATABASE_URL ?? readDevState(config.DATA_DIR)?.databaseUrl;
if (!databaseUrl) {
  process.stderr.write('No database: set DATABASE_URL, or start the development service with `npm start`.\n');
  process.exit(2);
}
const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
let temporal: { connection: Connection; client: Client } | null = null;
const context: AdminContext = {
  db: pool,
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  consoleUrl: config.CONSOLE_PUBLIC_URL ?? readDevState(config.DATA_DIR)?.consoleUrl,
  async temporal() {
    const address = config.TEMPORAL_ADDRESS ?? readDevState(config.DATA_DIR)?.temporalAddress;
    if (!address)
      throw new UsageError(
        'No Temporal: set TEMPORAL_ADDRESS, or start the development service with `npm start`.',
      );
    if (!temporal) {
      const connection = await Connection.connect(temporalConnectionOptions(address, config));
      temporal = {
        connection,
        client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }),
      };
    }
    return temporal.client;
  },
};
let exitCode = 0;
try {
  const result = await runAdminCommand(argv, context);
  process.stdout.write(json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text.join('\n')}\n`);
} catch (error) {
  if (error instanceof UsageError) exitCode = 2;
  else if (error instanceof WorkflowUpdateFailedError) exitCode = 1;
  else if (
    error instanceof NotFound ||
    error instanceof KeyCreationRefused ||
    error instanceof CatalogFileRefused ||
    error instanceof CommandRefused
  )
    exitCode = 1;
  else throw error;
  const message =
    error instanceof WorkflowUpdateFailedError
      ? String(error.cause?.message ?? error.message)
      : error.message;
  const code =
    error instanceof KeyCreationRefused
      ? error.reason
      : error instanceof NotFound
        ? 'not_found'
        : error instanceof WorkflowUpdateFailedError
          ? 'refused'
          : error instanceof CatalogFileRefused
            ? 'invalid_catalog'
            : error instanceof CommandRefused
              ? error.code
              : 'usage';
  const problems = error instanceof CatalogFileRefused ? { problems: error.problems } : {};
  if (json) process.stdout.write(`${JSON.stringify({ error: { code, message, ...problems } }, null, 2)}\n`);
  else process.stderr.write(`${message}\n`);
} finally {
  await pool.end();
  // Assigned inside context.temporal(), which TypeScript's narrowing cannot see.
  await (temporal as { connection: Connection } | null)?.connection.close();
}
process.exit(exitCode);
