import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type Provider from 'oidc-provider';
import { setClientSubject } from './client-limits.js';

/**
 * Hands the authorization server's paths to oidc-provider: everything under /oauth (its
 * endpoints; the console's own interaction pages, /oauth/interaction/…, are routes of their own and
 * win over the wildcard) and its metadata (RFC 8414 at /.well-known/oauth-authorization-server, and
 * the OpenID name for it). oidc-provider reads the body itself, so no parser of the console's runs
 * here; the console's session and form checks do not apply (these are OAuth endpoints). It builds
 * its URLs from the issuer: the request is told the issuer's scheme and host, whatever came in,
 * and whom the client limits count (client-limits.ts).
 */
export function mountAuthorizationServer(
  app: FastifyInstance,
  provider: Provider,
  issuer: string,
  clientSubject: (request: FastifyRequest) => string,
): void {
  const callback = provider.callback();
  const { protocol, host } = new URL(issuer);
  const handOver = (request: FastifyRequest, reply: FastifyReply) => {
    request.raw.headers['x-forwarded-proto'] = protocol.replace(/:$/, '');
    request.raw.headers['x-forwarded-host'] = host;
    // Whom its per-address limits count: the console's own reading of the address (TRUST_PROXY).
    setClientSubject(request.raw, clientSubject(request));
    reply.hijack();
    void callback(request.raw, reply.raw);
  };
  void app.register((scope, _options, done) => {
    // The body is left unread for oidc-provider (urlencoded forms and, for registration, JSON).
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, parsed) => parsed(null, undefined));
    const config = { consolePublic: true };
    scope.route({
      method: ['GET', 'POST', 'OPTIONS', 'DELETE', 'PUT'],
      url: '/oauth/*',
      config,
      handler: handOver,
    });
    for (const url of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'])
      scope.route({ method: ['GET', 'OPTIONS'], url, config, handler: handOver });
    done();
  });
}
