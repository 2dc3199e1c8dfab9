import type { FastifyInstance } from 'fastify';

/**
 * Headers every console answer carries. No inline script or style anywhere (script-src 'self'),
 * never framed (clickjacking), no referrer leaves for another site, private pages are never
 * cached. Images and videos may come from the result host, where results live.
 */
export function addSecurityHeaders(app: FastifyInstance, resultBaseUrl: string): void {
  const results = new URL(resultBaseUrl).origin;
  const policyWith = (formAction: string) =>
    [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      `img-src 'self' ${results}`,
      `media-src 'self' ${results}`,
      "connect-src 'self'",
      `form-action ${formAction}`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; ');
  const policy = policyWith("'self'");
  app.decorateRequest('formRedirectsTo', null);
  app.addHook('onSend', (request, reply, payload, done) => {
    const target = request.formRedirectsTo;
    reply.header('content-security-policy', target ? policyWith(`'self' ${target}`) : policy);
    reply.header('referrer-policy', 'no-referrer');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('x-frame-options', 'DENY');
    reply.header('cross-origin-opener-policy', 'same-origin');
    if (!request.url.startsWith('/static/')) reply.header('cache-control', 'no-store');
    done(null, payload);
  });
}

/**
 * What a page's form may end up at besides this site, as a CSP source: a consent form's answer is
 * redirected to the app (its redirect URI's origin, or its scheme for an app on the device), and
 * form-action covers the redirects that follow a form.
 */
export function formRedirectSource(redirectUri: string): string | null {
  try {
    const url = new URL(redirectUri);
    if (url.protocol === 'https:' || url.protocol === 'http:') return url.origin;
    return /^[a-z][a-z0-9+.-]*:$/.test(url.protocol) ? url.protocol : null;
  } catch {
    return null;
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A CSP source the page's form may be redirected to (formRedirectSource), beyond this site. */
    formRedirectsTo: string | null;
  }
}

/** Whether a base URL is plain HTTP on this machine, where a `Secure` cookie would never be sent back. */
export function isLoopbackHttp(baseUrl: string): boolean {
  const url = new URL(baseUrl);
  return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}
