import { Writable } from 'node:stream';
import { pino } from 'pino';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/service-config.js';
import { defaultCatalog } from '../../src/catalog/default-catalog.js';
import { logUnconfiguredProviders } from '../../src/worker/provider-registry.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('a worker without a provider’s credentials', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    const lumen = defaultCatalog.find((model) => model.id === 'lumen-lite')!.definition;
    const onFal = { ...lumen, provider: { name: 'fal', model: 'fal-ai/flux/schnell', input: {} } };
    for (const id of ['fal-one', 'fal-two'])
      await db.pool.query(sql.unsafe`
        INSERT INTO models (id, media_type, definition) VALUES (${id}, 'image', ${sql.jsonb(onFal as never)})`);
  });
  afterAll(() => db?.drop());

  const logged = async (env: Record<string, string>) => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const config = loadConfig({ DATABASE_URL: db.url, TEMPORAL_ADDRESS: '127.0.0.1:7233', ...env });
    await logUnconfiguredProviders(config, db.pool, pino(sink));
    return lines;
  };

  it('says once, naming the models and the variable, and says nothing once the key is set', async () => {
    const without = await logged({});
    expect(without).toHaveLength(1);
    expect(without[0]).toMatchObject({
      level: 40,
      provider: 'fal',
      models: ['fal-one', 'fal-two'],
      msg: expect.stringContaining('FAL_KEY is not set'),
    });
    expect(await logged({ FAL_KEY: 'k' })).toEqual([]);
  });
});
