import { createHash } from 'node:crypto';

/**
 * The request's fingerprint: SHA-256 of its canonical JSON. Object keys are
 * sorted (their order does not matter); everything else — array order,
 * whitespace inside strings, explicit defaults, fields the model ignores,
 * inline image bytes — is part of it.
 */
export function fingerprint(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

/** The JSON the fingerprint is taken of: object keys sorted, nothing else changed. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}
