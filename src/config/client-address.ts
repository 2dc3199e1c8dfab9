import type { TrustProxy } from './service-config.js';

/**
 * Fastify's `trustProxy` for TRUST_PROXY, for every process that judges a client by its address
 * (the API, the console). Fastify 5 takes a number to mean "trust no hop" (it cannot check who the
 * nearest peer is), so a hop count is given as a function: the socket's peer and the next
 * `hops - 1` entries of X-Forwarded-For are proxies.
 */
export function fastifyTrustProxy(
  trust: TrustProxy,
): false | string[] | ((address: string, hop: number) => boolean) {
  if (trust === false) return false;
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return [...trust];
}
