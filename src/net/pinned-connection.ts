import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { AddressPolicy } from './address-policy.js';
import { forbidden } from './outbound-fetch-error.js';

/**
 * One GET on a connection of its own whose address the AddressPolicy has allowed: the name is
 * resolved by our own lookup, which refuses the connection unless every address the name resolves
 * to is allowed, and the socket connects to exactly those addresses, so a name that changes its
 * answer between a check and the connection (DNS rebinding) gains nothing. Resolves with the
 * response, unread.
 */
export function pinnedGet(
  url: URL,
  context: {
    policy: AddressPolicy;
    signal: AbortSignal;
    ca: string[] | undefined;
    accept?: readonly string[];
  },
): Promise<http.IncomingMessage> {
  return pinnedRequest(url, {
    ...context,
    method: 'GET',
    headers: { accept: context.accept?.join(', ') ?? '*/*', 'accept-encoding': 'identity' },
  });
}

/** One request (GET, or a POST with its body: a webhook delivery) on a pinned connection, as pinnedGet. */
export function pinnedRequest(
  url: URL,
  context: {
    policy: AddressPolicy;
    signal: AbortSignal;
    ca: string[] | undefined;
    method: 'GET' | 'POST';
    headers: Record<string, string>;
    body?: Buffer;
    /** The resolver asked for the name's addresses (default dns.lookup; tests give one that changes its answer). */
    resolve?: Resolve;
  },
): Promise<http.IncomingMessage> {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = transport.request({
      protocol: url.protocol,
      hostname: bareHost(url),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method: context.method,
      headers: { 'user-agent': 'generation-service', ...context.headers },
      // A connection of its own: nothing is pooled across fetches or hops.
      agent: false,
      lookup: guardedLookup(url, context.policy, context.resolve ?? dnsLookup),
      signal: context.signal,
      ...(context.ca ? { ca: context.ca } : {}),
    });
    request.once('response', resolve);
    request.on('error', reject);
    request.end(context.body);
  });
}

/** A name's addresses, as dns.lookup with `all: true` answers them. */
export type Resolve = (
  hostname: string,
  options: { all: true; family: LookupOptions['family'] },
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * The resolver the socket connects through: it resolves the name once, and
 * hands the socket those addresses only when every one of them is allowed.
 */
function guardedLookup(url: URL, policy: AddressPolicy, resolve: Resolve) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, { all: true, family: options.family ?? 0 }, (error, addresses) => {
      if (error) return callback(error, []);
      if (addresses.length === 0) {
        const none: NodeJS.ErrnoException = new Error(`${hostname} has no address`);
        none.code = 'ENOTFOUND';
        return callback(none, []);
      }
      for (const { address } of addresses) {
        const verdict = policy.check(address);
        if (!verdict.allowed) return callback(forbidden(url, address, verdict.range), []);
      }
      if (options.all) return callback(null, addresses);
      const [first] = addresses;
      return callback(null, first!.address, first!.family);
    });
  };
}

/** The host without the brackets of an IPv6 literal. */
export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}
