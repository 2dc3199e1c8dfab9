import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { customSearchAttributes } from '../workflows/search-attributes.js';

// CommonJS package: its namespace is reachable only through the default export under plain Node ESM.
const { IndexedValueType } = proto.temporal.api.enums.v1;
const indexedType = {
  KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  BOOL: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
} as const;

/**
 * Registers our custom search attributes on a namespace, skipping those that
 * exist. Works on a fresh dev server, on an existing dev-server database file,
 * and on the time-skipping test server (which cannot list them).
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  let existing = new Set<string>();
  try {
    const listed = await connection.operatorService.listSearchAttributes({ namespace });
    existing = new Set(Object.keys(listed.customAttributes ?? {}));
  } catch {
    // The time-skipping test server has no ListSearchAttributes; adding is still idempotent enough there.
  }
  const missing = customSearchAttributes.filter((key) => !existing.has(key.name));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((key) => [key.name, indexedType[key.type]])),
  });
  return missing.map((key) => key.name);
}
