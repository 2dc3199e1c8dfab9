import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const migrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));
/** An arbitrary constant: the advisory lock every migrating process takes, so two starts never interleave. */
const MIGRATION_LOCK = 7_413_001;

/** A model to insert when it is missing. Plain data: the caller has checked the definition, stored as given. */
export interface ModelSeed {
  id: string;
  media_type: string;
  definition: unknown;
  sort_order: number;
}

export interface MigrationResult {
  applied: string[];
  skipped: string[];
  seededModels: string[];
}

/**
 * Applies every `migrations/*.sql` file not applied yet, in name order, each in
 * its own transaction, then inserts the given models that are missing
 * (existing rows, and prices edited in them, are left alone). Safe to run at
 * every start and from several processes at once.
 */
export async function applyMigrations(
  databaseUrl: string,
  models: readonly ModelSeed[],
): Promise<MigrationResult> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort();
  const result: MigrationResult = { applied: [], skipped: [], seededModels: [] };
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await client.query<{ name: string; sha256: string }>(
      'SELECT name, sha256 FROM schema_migrations',
    );
    const applied = new Map(rows.map((row) => [row.name, row.sha256]));
    for (const file of files) {
      const text = await readFile(`${migrationsDir}${file}`, 'utf8');
      const digest = createHash('sha256').update(text).digest('hex');
      const previous = applied.get(file);
      if (previous !== undefined) {
        if (previous !== digest)
          throw new Error(`migration ${file} changed after it was applied; add a new migration instead`);
        result.skipped.push(file);
        continue;
      }
      try {
        await client.query('BEGIN');
        await client.query(text);
        await client.query('INSERT INTO schema_migrations (name, sha256) VALUES ($1, $2)', [file, digest]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${file} failed`, { cause: error });
      }
      result.applied.push(file);
    }
    for (const model of models) {
      const inserted = await client.query(
        `INSERT INTO models (id, media_type, definition, sort_order) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO NOTHING`,
        [model.id, model.media_type, JSON.stringify(model.definition), model.sort_order],
      );
      if (inserted.rowCount === 1) result.seededModels.push(model.id);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await client.end();
  }
  return result;
}
