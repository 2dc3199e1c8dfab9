import type { FastifyInstance } from 'fastify';

/**
 * Headers every console answer carries. No inline script or style anywhere (script-src 'self'),
 * never framed (clickjacking), no referrer leaves for another site, private pages are never
 * cached. Images and videos may come from the result host, where results live.
 */
export function addSecurityHeaders(app: FastifyInstance, resultBaseUrl: string): void {
  const results = new URL(resultBaseUrl).origin;
  const policy = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' ${results}`,
    `media-src 'self' ${results}`,
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('content-security-policy', policy);
    reply.header('referrer-policy', 'no-referrer');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('x-frame-options', 'DENY');
    reply.header('cross-origin-opener-policy', 'same-origin');
    if (!request.url.startsWith('/static/')) reply.header('cache-control', 'no-store');
    done(null, payload);
  });
}

/** Whether a base URL is plain HTTP on this machine, where a `Secure` cookie would never be sent back. */
export function isLoopbackHttp(baseUrl: string): boolean {
  const url = new URL(baseUrl);
  return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}
