import type { CommonQueryMethods } from 'slonik';
import { storeApiKey, type ApiKeyRecord } from '../db/api-keys-repository.js';
import { displayPrefix, generateApiKey, hashApiKey } from './api-key.js';

/**
 * Mints a key for an account that may have one (see storeApiKey) and stores its hash. Returns
 * the plaintext, which is never stored and cannot be shown again.
 */
export async function createApiKey(
  db: CommonQueryMethods,
  input: { accountId: string; name?: string },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateApiKey();
  const record = await storeApiKey(db, {
    accountId: input.accountId,
    name: input.name,
    keySha256: hashApiKey(key),
    displayPrefix: displayPrefix(key),
  });
  return { key, record };
}
