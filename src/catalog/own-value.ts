/**
 * The value `record` holds under `key` itself, never one inherited from Object.prototype. Catalog
 * records (prices, surcharges, value maps, options) are keyed by values that an operator or a
 * client chooses: with a plain lookup or `in`, a value named `constructor` or `toString` "has" a
 * price (a function), and admission fails with a 500 instead of the request being judged.
 */
export function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
