import { hash } from 'node:crypto';
import { randomBase62 } from '../vocabulary/ids.js';

/** Every live key starts with this; secret scanners can match on it. */
export const API_KEY_PREFIX = 'gsk_live_';
export const API_KEY_LENGTH = 41;
const secretLength = API_KEY_LENGTH - API_KEY_PREFIX.length;
const keyPattern = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${secretLength}}$`);

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBase62(secretLength);
}

/** Whether a presented value could be a key at all (checked before hashing). */
export function isWellFormedApiKey(value: string): boolean {
  return keyPattern.test(value);
}

/** The only form in which a key is stored: SHA-256 of the whole key, hex. */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** What is shown to identify a key without revealing it, e.g. `gsk_live_Ab3d…`. */
export function displayPrefix(key: string): string {
  return key.slice(0, API_KEY_PREFIX.length + 4);
}
