import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
// @ts-expect-error: a plain .mjs script without declarations; it exports typesFor and typesFile.
import { typesFile, typesFor } from '../../clients/typescript/scripts/generate-types.mjs';
import { startTestApi } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe("the client's generated types", () => {
  let db: TestDatabase;
  let api: ApiService;
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('are what openapi-typescript makes of the live /v1/openapi.json (regenerate: UPDATE_CLIENT_TYPES=1)', async () => {
    const document = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const fresh: string = await typesFor(document);
    if (process.env.UPDATE_CLIENT_TYPES === '1') await writeFile(typesFile, fresh);
    const committed = await readFile(typesFile, 'utf8');
    expect(
      committed,
      'clients/typescript/src/generated/openapi.ts is stale: run with UPDATE_CLIENT_TYPES=1',
    ).toBe(fresh);
    // The types name what the client relies on.
    expect(fresh).toContain('Generation: {');
    expect(fresh).toContain('credits_refunded: boolean');
  });
});
