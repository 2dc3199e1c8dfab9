import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/service-config.js';
import { getGeneration } from '../../src/db/generation-reads.js';
import { NotificationListener } from '../../src/db/notifications.js';
import { ValidationError } from '../../src/vocabulary/errors.js';
import { admitGeneration, quoteGeneration } from '../../src/generations/admission/admit-generation.js';
import { wireAdmission, type AdmissionWiring } from '../../src/generations/admission/admission-wiring.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

/**
 * Admission as one unit, with no HTTP in front of it: wired from configuration as the API and the
 * console wire it (wireAdmission), it admits a generation, quotes one, and refuses an invalid one,
 * as any front door (an HTTP body, a console form, a tool's arguments, a batch line) would have it.
 */
describe('admission without a front door', () => {
  const log = pino({ level: 'silent' });
  let db: TestDatabase;
  let worker: TestWorker;
  let account: TestAccount;
  let listener: NotificationListener;
  let admission: AdmissionWiring;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool);
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    const config = loadConfig({
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      ...worker.apiEnv,
    });
    listener = new NotificationListener(config.DATABASE_URL, log);
    admission = wireAdmission(config, { pool: db.pool, listener, logger: log });
    await listener.start();
    await admission.start();
  });

  afterAll(async () => {
    await admission?.close();
    await listener?.close();
    await worker?.close();
    await db?.drop();
  });

  const principal = () => ({ accountId: account.accountId, keyId: account.keyId });
  const body = { model: 'lumen-lite', prompt: 'a lighthouse keeper at dawn' };

  it('quotes a request, then admits it at that price (its generation recorded, debited), once per key', async () => {
    const quote = await quoteGeneration(admission.deps, body);
    expect(quote).toEqual({ model: 'lumen-lite', credits: expect.any(Number), provider: 'simulated' });

    const admitted = await admitGeneration(
      admission.deps,
      { principal: principal(), idempotencyKey: 'unit-1', body, recordInvalid: true },
      log,
    );
    expect(admitted.known).toMatchObject({ id: admitted.generationId, credits: quote.credits });
    const row = await getGeneration(db.pool, account.accountId, admitted.generationId);
    expect(row).toMatchObject({ model: 'lumen-lite', credits: quote.credits });

    // The same request again is the same generation: its key names it.
    const again = await admitGeneration(
      admission.deps,
      { principal: principal(), idempotencyKey: 'unit-1', body, recordInvalid: true },
      log,
    );
    expect(again.generationId).toBe(admitted.generationId);
  });

  it('refuses an invalid request with every issue, the quote with the same ones', async () => {
    const invalid = { model: 'lumen-lite', prompt: 42, webhook: { url: 'http://example.com/hook' } };
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => {
          throw new Error('answered, not refused');
        },
        (error: unknown) => error,
      );

    const admitted = await refusal(
      admitGeneration(
        admission.deps,
        { principal: principal(), idempotencyKey: 'has a space', body: invalid, recordInvalid: false },
        log,
      ),
    );
    expect(admitted).toBeInstanceOf(ValidationError);
    const fields = (error: unknown) => ((error as ValidationError).extra.issues ?? []).map((i) => i.field);
    expect(fields(admitted)).toEqual(['Idempotency-Key', 'prompt', 'webhook.url']);

    const quoted = await refusal(quoteGeneration(admission.deps, invalid));
    expect(quoted).toBeInstanceOf(ValidationError);
    expect(fields(quoted)).toEqual(['prompt', 'webhook.url']);
  });
});
