/**
 * A fresh Idempotency-Key: a UUID v4 from the runtime's Web Crypto (Node 20+, Bun, Deno and
 * browsers all have crypto.randomUUID), made once per create call, before its first attempt.
 */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}
