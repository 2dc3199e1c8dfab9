import { KeyCreationRefused } from '../db/api-keys-repository.js';
import { NotFound } from '../db/accounts-repository.js';
import { createDatabasePool } from '../db/pool.js';
import { readDevState } from '../dev/dev-state.js';
import { runAdminCommand, UsageError, usage } from './commands.js';

/**
 * `npm run admin -- <command>`. Uses DATABASE_URL, or the database of the
 * development service that `npm start` is running.
 */
const argv = process.argv.slice(2);
const json = argv.includes('--json');
if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help') {
  process.stdout.write(`${usage()}\n`);
  process.exit(0);
}
const databaseUrl = process.env.DATABASE_URL ?? readDevState()?.databaseUrl;
if (!databaseUrl) {
  process.stderr.write('No database: set DATABASE_URL, or start the development service with `npm start`.\n');
  process.exit(2);
}
const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
let exitCode = 0;
try {
  const result = await runAdminCommand(argv, pool);
  process.stdout.write(json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text.join('\n')}\n`);
} catch (error) {
  if (error instanceof UsageError) exitCode = 2;
  else if (error instanceof NotFound || error instanceof KeyCreationRefused) exitCode = 1;
  else throw error;
  const message = error.message;
  const code =
    error instanceof KeyCreationRefused ? error.reason : error instanceof NotFound ? 'not_found' : 'usage';
  if (json) process.stdout.write(`${JSON.stringify({ error: { code, message } }, null, 2)}\n`);
  else process.stderr.write(`${message}\n`);
} finally {
  await pool.end();
}
process.exit(exitCode);
