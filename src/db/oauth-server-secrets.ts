import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const secretRow = z.object({ value: z.unknown() });

/**
 * One of the authorization server's own secrets (migration 0025: `jwks`, `cookie_keys`): the one
 * stored, or `make()`'s, stored now. Two consoles starting at once agree on the first one written.
 */
export async function serverSecret<T>(
  db: CommonQueryMethods,
  name: 'jwks' | 'cookie_keys',
  make: () => Promise<T>,
): Promise<T> {
  const found = await db.maybeOne(
    sql.type(secretRow)`SELECT value FROM oauth_server_secrets WHERE name = ${name}`,
  );
  if (found) return found.value as T;
  const made = await make();
  await db.query(sql.unsafe`
    INSERT INTO oauth_server_secrets (name, value)
    VALUES (${name}, ${sql.jsonb(made as Parameters<typeof sql.jsonb>[0])})
    ON CONFLICT (name) DO NOTHING`);
  const stored = await db.one(
    sql.type(secretRow)`SELECT value FROM oauth_server_secrets WHERE name = ${name}`,
  );
  return stored.value as T;
}
