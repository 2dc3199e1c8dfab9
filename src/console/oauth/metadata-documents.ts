import { errors } from 'oidc-provider';
import { outboundFetch } from '../../net/outbound-fetch.js';
import { MAX_CLIENT_METADATA_BYTES, redirectUriKind } from './client-metadata.js';

/** How a Client ID Metadata Document is fetched: the service's outbound rules (src/net). */
export interface MetadataFetchRules {
  allowCidrs: readonly string[];
  timeoutMs: number;
  extraCa?: readonly string[];
}

/**
 * How long a fetched document is used before it is fetched again, in seconds: its own
 * `Cache-Control: max-age` (or `Expires`), held within these bounds (oidc-provider's cacheDuration).
 */
export const METADATA_CACHE_SECONDS = { min: 30, max: 24 * 3600 };
/** How long a document that could not be fetched, or not used, is not fetched again. */
export const METADATA_FAILURE_CACHE_MS = 30_000;
/** Failures remembered at most (the oldest go first). */
const maxFailuresKept = 1_000;

/**
 * The Client ID Metadata Documents oidc-provider fetches (its `fetch` option; the only fetch it
 * makes here: no JWT client authentication, request object or encryption is enabled), under the
 * service's outbound rules: public addresses only unless allowed on purpose, checked at the
 * connection; no redirects; at most 5 KiB; one deadline. The answer keeps its Cache-Control and
 * Expires, which oidc-provider reads for how long to use it (METADATA_CACHE_SECONDS). A document
 * that fails (no answer, an error status, not a usable document) is remembered for
 * METADATA_FAILURE_CACHE_MS: asked for again meanwhile, it is refused without a fetch
 * (`refuseIfFailedLately`, from allowFetch).
 */
export class MetadataDocuments {
  private readonly failures = new Map<string, { at: number; reason: string }>();

  constructor(
    private readonly rules: MetadataFetchRules,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Throws invalid_client when `url` failed within METADATA_FAILURE_CACHE_MS. */
  refuseIfFailedLately(url: string): void {
    const failed = this.failures.get(url);
    if (!failed) return;
    const left = failed.at + METADATA_FAILURE_CACHE_MS - this.now();
    if (left <= 0) {
      this.failures.delete(url);
      return;
    }
    throw new errors.InvalidClient(
      `client_id metadata document could not be used (${failed.reason}); it is not fetched again for ${Math.ceil(left / 1000)} s`,
    );
  }

  async fetch(url: string, init: RequestInit | undefined): Promise<Response> {
    let fetched;
    try {
      fetched = await outboundFetch(url, {
        maxBytes: MAX_CLIENT_METADATA_BYTES,
        timeoutMs: this.rules.timeoutMs,
        accept: ['application/json'],
        maxRedirects: 0,
        allowCidrs: this.rules.allowCidrs,
        ...(this.rules.extraCa?.length ? { extraCa: this.rules.extraCa } : {}),
        ...(init?.signal ? { signal: init.signal } : {}),
      });
    } catch (error) {
      // Given up by the request that asked (its client left): no verdict on the document.
      if (!init?.signal?.aborted) this.remember(url, error instanceof Error ? error.message : String(error));
      throw error;
    }
    // Judged as oidc-provider and checkClientMetadata will judge it, to remember a failure; the
    // document still goes to them, whose refusal names the problem.
    const problem = documentProblem(url, fetched.bytes);
    if (problem) this.remember(url, problem);
    const headers = new Headers({ 'content-type': fetched.contentType });
    for (const name of ['cache-control', 'expires']) {
      const value = fetched.headers[name];
      if (typeof value === 'string') headers.set(name, value);
    }
    return new Response(new Uint8Array(fetched.bytes), { status: 200, headers });
  }

  private remember(url: string, reason: string): void {
    this.failures.delete(url);
    this.failures.set(url, { at: this.now(), reason });
    for (const oldest of this.failures.keys()) {
      if (this.failures.size <= maxFailuresKept) break;
      this.failures.delete(oldest);
    }
  }
}

/** Why a fetched document cannot describe the client `url`, or null. */
function documentProblem(url: string, bytes: Buffer): string | null {
  let document: unknown;
  try {
    document = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    return 'not a JSON object';
  const fields = document as Record<string, unknown>;
  if (fields.client_id !== url) return 'its client_id is not its URL';
  if ('client_secret' in fields) return 'it holds a client secret';
  const uris = fields.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0) return 'no redirect_uris';
  for (const uri of uris) {
    if (typeof uri !== 'string') return 'a redirect URI that is not a string';
    const judged = redirectUriKind(uri);
    if ('problem' in judged) return judged.problem;
  }
  return null;
}
