import { randomBytes } from 'node:crypto';

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes are drawn from the CSPRNG in 4 KiB blocks: one call per id would cost
// more than the rest of an authenticated request.
let pool = randomBytes(4096);
let offset = 0;

function nextRandomByte(): number {
  if (offset === pool.length) {
    pool = randomBytes(4096);
    offset = 0;
  }
  return pool[offset++]!;
}

/** `length` characters drawn uniformly from [0-9A-Za-z] by a CSPRNG. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = nextRandomByte();
    // 248 = 4 × 62: rejecting the top bytes keeps every character equally likely.
    if (byte < 248) out += alphabet[byte % 62];
  }
  return out;
}

type IdPrefix = 'acct' | 'pur' | 'key' | 'gen' | 'req' | 'batch';

/** A new opaque id such as `gen_4f9XkQ2mB7cR1tLpZ8vNa3`. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(22)}`;
}
