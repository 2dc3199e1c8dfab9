import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { projectRoot } from '../config/project-root.js';
import { freePort } from './free-port.js';
import { startMigratedPostgres } from './migrated-postgres.js';
import { renderSchema, schemaFilePath } from './schema-file.js';

/**
 * `npm run db:schema`: applies every migration to a throw-away embedded PostgreSQL (the way the
 * tests' template database is made) and writes src/db/schema.sql from its catalogs.
 */
const postgres = await startMigratedPostgres({
  dataDir: path.join(projectRoot, '.data', `schema-postgres-${process.pid}`),
  port: await freePort(),
  database: 'schema',
  persistent: false,
});
try {
  await writeFile(schemaFilePath, await renderSchema(postgres.url));
} finally {
  await postgres.stop();
}
process.stdout.write(`wrote ${path.relative(process.cwd(), schemaFilePath)}\n`);
