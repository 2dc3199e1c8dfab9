import { ApiError } from '../vocabulary/errors.js';

/** How long a client refused a place is asked to wait before sending its upload again. */
export const uploadRetryAfterSeconds = 5;

/**
 * The batch uploads (POST /v1/batches and its quote) this API process is reading, counted per API
 * key: at most `perKey` at once (BATCH_UPLOADS_PER_KEY). One more is refused before its body is
 * read: `429 rate_limited` with Retry-After.
 */
export class BatchUploads {
  private readonly open = new Map<string, number>();

  constructor(private readonly perKey: number) {}

  /** Takes a place for the key's upload; returns the function that gives it back (idempotent), or throws the 429. */
  take(keyId: string): () => void {
    const n = this.open.get(keyId) ?? 0;
    if (n >= this.perKey)
      throw new ApiError(
        'rate_limited',
        `At most ${this.perKey} batch uploads (POST /v1/batches and its quote) are read at once for an API key; send this one when another has been answered.`,
        { retryAfterSeconds: uploadRetryAfterSeconds },
      );
    this.open.set(keyId, n + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.open.get(keyId) ?? 1) - 1;
      if (left > 0) this.open.set(keyId, left);
      else this.open.delete(keyId);
    };
  }
}
