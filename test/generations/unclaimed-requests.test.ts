import { readdir } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { useGenerationStack } from '../support/stack.js';
import { createPaidAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { workflowIdOf } from '../support/ledger.js';

/** Every file under a folder, as paths relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

/**
 * What a request that never runs leaves behind: no stored input images, and no workflow held open
 * for the key horizon when there is no key to hold.
 */
describe('requests that never run leave nothing behind', () => {
  const stack = useGenerationStack({
    worker: { concurrencyLimit: 1 },
    apiEnv: { RESULT_RETENTION_MS: '300' },
  });
  let dataUri = '';
  const inputFiles = async () => (await filesUnder(stack.worker.storageDir)).filter((f) => f.startsWith('i'));
  const workflowStatus = async (generationId: string) =>
    (await stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, generationId)).describe()).status
      .name;

  it('prepares a real reference image', async () => {
    const png = await sharp({
      create: { width: 64, height: 64, channels: 3, background: { r: 200, g: 40, b: 90 } },
    })
      .png()
      .toBuffer();
    dataUri = `data:image/png;base64,${png.toString('base64')}`;
    expect(dataUri.length).toBeGreaterThan(100);
  });

  it('a 402 stores no inline images, with or without a key, and holds no workflow open', async () => {
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const body = { model: 'lumen-pro', prompt: 'too dear', images: [dataUri, dataUri] };
    const refused = [
      await createGeneration(stack.api, poor.key, body),
      await createGeneration(stack.api, poor.key, body, 'poor-1'),
      await createGeneration(stack.api, poor.key, body, 'poor-1'),
    ];
    expect(refused.map((r) => r.statusCode)).toEqual([402, 402, 402]);
    expect(await inputFiles()).toEqual([]);
    const keyless = String(refused[0]!.headers['x-request-id']);
    await expect.poll(() => workflowStatus(keyless), { timeout: 10_000 }).toBe('COMPLETED');
    // The keyed 402 claims its key: its record in PostgreSQL holds it (the retry got the same 402 and
    // id), so its workflow ends too.
    const keyed = String(refused[1]!.headers['x-request-id']);
    expect(refused[2]!.headers['x-request-id']).toBe(keyed);
    await expect.poll(() => workflowStatus(keyed), { timeout: 10_000 }).toBe('COMPLETED');
  });

  it('a 409 keeps the original’s images and drops its own', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const original = await createGeneration(
      stack.api,
      account.key,
      { model: 'lumen-pro', prompt: 'original', images: [dataUri] },
      'conflicting',
    );
    expect(original.statusCode).toBe(202);
    const before = await inputFiles();
    expect(before).toHaveLength(1);
    const conflict = await createGeneration(
      stack.api,
      account.key,
      { model: 'lumen-pro', prompt: 'another body', images: [dataUri, dataUri] },
      'conflicting',
    );
    expect(conflict.statusCode).toBe(409);
    expect(await inputFiles()).toEqual(before);
    await pollGeneration(stack.api, account.key, original.json().id);
  });

  it('a concurrency rejection stores no inline images', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const busy = await createGeneration(stack.api, account.key, {
      model: 'lumen-pro',
      prompt: 'taking the only slot [sim:slow=3]',
    });
    expect(busy.statusCode).toBe(202);
    const before = await inputFiles();
    const refused = await createGeneration(stack.api, account.key, {
      model: 'lumen-pro',
      prompt: 'one too many',
      images: [dataUri],
    });
    expect(refused.statusCode).toBe(429);
    expect(await inputFiles()).toEqual(before);
    await pollGeneration(stack.api, account.key, busy.json().id);
  });

  it('a keyless generation’s workflow ends with its story, not at the key horizon', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const created = await createGeneration(stack.api, account.key, { model: 'lumen-lite', prompt: 'no key' });
    const id = created.json().id as string;
    await pollGeneration(stack.api, account.key, id, (g) => g.content_expired === true);
    await expect.poll(() => workflowStatus(id), { timeout: 10_000 }).toBe('COMPLETED');
  });
});
