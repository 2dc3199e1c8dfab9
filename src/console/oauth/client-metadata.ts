import { errors } from 'oidc-provider';

/** The loopback hosts a redirect may use over plain HTTP (RFC 8252 §7.3, OAuth 2.1 §8.4.3). */
const loopbacks = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Schemes a browser or the system runs or reads itself: never a redirect. */
const forbiddenSchemes = new Set(['javascript:', 'vbscript:', 'data:', 'blob:', 'file:', 'about:', 'ftp:']);

/** The most client metadata kept for one client, registered or fetched (a real one is under 1 KiB). */
export const MAX_CLIENT_METADATA_BYTES = 5 * 1024;

/** What kind of redirect a URI is, or why it may not be one. */
export type RedirectKind = 'https' | 'loopback' | 'private-use';

/**
 * Where an authorization code may be sent (OAuth 2.1 §2.3.1 and §8.4, the MCP authorization spec's
 * "HTTPS or localhost"): an `https://` URL; an `http://` URL on a loopback host (any port); or a
 * native app's private-use scheme named after a domain it controls, in reverse order
 * (`com.example.app:/callback`, RFC 8252 §7.1). Never a fragment or credentials in the URL. The
 * kind, or a sentence saying why not.
 */
export function redirectUriKind(uri: string): { kind: RedirectKind } | { problem: string } {
  const url = URL.parse(uri);
  if (!url) return { problem: `${uri} is not a URL` };
  if (url.hash || uri.includes('#')) return { problem: `${uri} has a fragment` };
  if (url.username || url.password) return { problem: `${uri} carries credentials` };
  if (url.protocol === 'https:') return url.hostname ? { kind: 'https' } : { problem: `${uri} has no host` };
  if (url.protocol === 'http:')
    return loopbacks.has(url.hostname)
      ? { kind: 'loopback' }
      : { problem: `${uri} is plain http on a host that is not loopback: use https` };
  if (forbiddenSchemes.has(url.protocol)) return { problem: `${uri} uses a scheme that is never a redirect` };
  if (!url.protocol.slice(0, -1).includes('.'))
    return {
      problem: `${uri}: a native app's own scheme is named after its domain, in reverse order (com.example.app:/callback)`,
    };
  if (!url.pathname && !url.host) return { problem: `${uri} names no path` };
  return { kind: 'private-use' };
}

/**
 * oidc-provider's `extraClientMetadata` validator, run on every client's metadata, registered (RFC
 * 7591) or described by its metadata document, each time it is read (a stored client is held to
 * today's rules too):
 *
 * - `redirect_uris`: each is held to redirectUriKind; refused, 400 `invalid_redirect_uri` (RFC 7591
 *   §3.2.2). A client whose redirects are a loopback or a private-use scheme is a native app
 *   (oidc-provider then accepts the scheme and matches a loopback redirect whatever its port, RFC
 *   8252 §7.3).
 * - `client_secret`: none is kept. Clients are public (token endpoint auth `none`, the only method
 *   offered). oidc-provider makes a secret for a registration that does not name its method (RFC
 *   7591's default is `client_secret_basic`, though this server's is `none`), and would store it in
 *   clear: it is dropped here, and metadata that truly needs one (an HMAC algorithm) is then refused,
 *   400 `invalid_client_metadata`.
 * - Size: the metadata kept (what oidc-provider recognizes, the rest is dropped) is at most
 *   MAX_CLIENT_METADATA_BYTES, as a metadata document is; larger, 400 `invalid_client_metadata`.
 */
export function checkClientMetadata(
  _ctx: unknown,
  key: string,
  value: unknown,
  metadata: Record<string, unknown>,
): void {
  if (key === 'client_secret') {
    delete metadata.client_secret;
    delete metadata.client_secret_expires_at;
    if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_CLIENT_METADATA_BYTES)
      throw new errors.InvalidClientMetadata(
        `client metadata is larger than ${MAX_CLIENT_METADATA_BYTES / 1024} KiB`,
      );
    return;
  }
  if (key !== 'redirect_uris' || !Array.isArray(value)) return; // the schema itself says what is wrong
  const kinds = value
    .filter((uri): uri is string => typeof uri === 'string')
    .map((uri) => {
      const judged = redirectUriKind(uri);
      if ('problem' in judged)
        throw new errors.CustomOIDCProviderError('invalid_redirect_uri', judged.problem);
      return {
        kind: judged.kind,
        loopbackHttps: judged.kind === 'https' && loopbacks.has(new URL(uri).hostname),
      };
    });
  if (kinds.some((k) => k.kind !== 'https') && !kinds.some((k) => k.loopbackHttps))
    metadata.application_type = 'native';
}
