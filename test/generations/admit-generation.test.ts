import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogCache } from '../../src/catalog/catalog-cache.js';
import { listGenerations } from '../../src/db/generation-reads.js';
import { ApiError, ValidationError } from '../../src/vocabulary/errors.js';
import { admitGeneration, type AdmissionDeps } from '../../src/generations/admission/admit-generation.js';
import { ApiGenerationMetrics } from '../../src/observability/metrics.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const DAY = 24 * 3600 * 1000;

/**
 * admitGeneration's checks and refusals before anything starts: the part the API's POST and the
 * console's playground share and answer differently (recorded or not, the uploads' own issues).
 * Nothing here reaches Temporal: its client points at a port nothing listens on, so a request that
 * got as far as a start would fail with admission's timeout, not with the errors asserted here.
 */
describe('admitGeneration before the start', () => {
  const log = pino({ level: 'silent' });
  let db: TestDatabase;
  let account: TestAccount;
  let storageDir: string;
  let connection: Connection;
  let registry: Registry;
  let deps: AdmissionDeps;
  let downFor: number | null = null;

  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool);
    const catalog = new CatalogCache(db.pool, log);
    await catalog.start(60_000);
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'admit-generation-'));
    connection = Connection.lazy({ address: '127.0.0.1:1' });
    registry = new Registry();
    deps = {
      db: db.pool,
      catalog,
      temporal: new Client({ connection }),
      taskQueue: 'never-polled',
      storage: new LocalStorage(storageDir, 'http://results.test'),
      admissionTimeoutMs: 1000,
      timing: {
        submitTimeoutMs: 1000,
        pollIntervalMs: 10,
        resultRetentionMs: DAY,
        idempotencyRetentionMs: DAY,
      },
      providerDownFor: () => downFor,
      metrics: new ApiGenerationMetrics(registry),
    };
  });

  afterAll(async () => {
    await connection?.close();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const principal = () => ({ accountId: account.accountId, keyId: account.keyId });
  const rows = () =>
    listGenerations(db.pool, {
      accountId: account.accountId,
      limit: 100,
      statuses: null,
      model: null,
      after: null,
    });
  const rejectedCount = async (code: string) => {
    const metric = (await registry.getMetricsAsJSON()).find((m) =>
      m.name.endsWith('generations_rejected_total'),
    );
    return (metric?.values ?? [])
      .filter((v) => v.labels.code === code)
      .reduce((sum, v) => sum + Number(v.value), 0);
  };
  const refusalOf = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('admitted, not refused');
      },
      (error: unknown) => error as ApiError,
    );

  it('an invalid request names every issue; recorded as a rejected generation only when asked (the API)', async () => {
    const request = {
      principal: principal(),
      idempotencyKey: 'has a space',
      body: { model: 'lumen-lite', prompt: 42 },
    };
    const before = await rejectedCount('invalid_request');

    const recorded = await refusalOf(admitGeneration(deps, { ...request, recordInvalid: true }, log));
    expect(recorded).toBeInstanceOf(ValidationError);
    expect(recorded.extra.issues?.map((i) => i.field)).toEqual(['Idempotency-Key', 'prompt']);
    const listed = await rows();
    expect(listed.map((r) => [r.id, r.status, r.model])).toEqual([
      [recorded.extra.requestId, 'rejected', 'lumen-lite'],
    ]);

    // The console's form: the same issues, shown beside its fields, and no row.
    const shown = await refusalOf(admitGeneration(deps, { ...request, recordInvalid: false }, log));
    expect(shown).toBeInstanceOf(ValidationError);
    expect(shown.extra.issues).toEqual(recorded.extra.issues);
    expect(shown.extra.requestId).toBeUndefined();
    expect(await rows()).toHaveLength(1);
    expect(await rejectedCount('invalid_request')).toBe(before + 2);
  });

  it("the transport's own upload issues come first and stand for their field", async () => {
    const upload = {
      field: 'images',
      code: 'invalid_value',
      message: 'a.png is not a PNG, JPEG, WebP or GIF image.',
    };
    const refused = await refusalOf(
      admitGeneration(
        deps,
        {
          principal: principal(),
          idempotencyKey: 'console-form-1',
          // The body's images are not a list of images either: that issue is the upload's to tell.
          body: { model: 'lumen-pro', prompt: 'a cat', images: 'not an image' },
          recordInvalid: false,
          uploads: { issues: [upload], forFingerprint: (b) => b, withStagedImages: (i) => i },
        },
        log,
      ),
    );
    expect(refused).toBeInstanceOf(ValidationError);
    expect(refused.extra.issues).toEqual([upload]);
  });

  it('refuses a new generation while its provider is down, before anything is stored or started', async () => {
    downFor = 42;
    try {
      const before = await rejectedCount('service_unavailable');
      const rowsBefore = (await rows()).length;
      const refused = await refusalOf(
        admitGeneration(
          deps,
          {
            principal: principal(),
            idempotencyKey: undefined,
            body: {
              model: 'lumen-pro',
              prompt: 'a cat',
              images: [`data:image/png;base64,${onePixelPng}`],
            },
            recordInvalid: true,
          },
          log,
        ),
      );
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused.code).toBe('service_unavailable');
      expect(refused.extra.retryAfterSeconds).toBe(42);
      expect(refused.message).toContain('The provider of model lumen-pro is unavailable');
      expect(await rejectedCount('service_unavailable')).toBe(before + 1);
      expect(await rows()).toHaveLength(rowsBefore);
      expect(await readdir(storageDir)).toEqual([]);
    } finally {
      downFor = null;
    }
  });
});

const onePixelPng =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
