import ipaddr from 'ipaddr.js';

/**
 * Whom the failed-authentication limit counts for a client address: an IPv4 address itself (an
 * IPv4-mapped IPv6 address too), but an IPv6 address's network of `ipv6PrefixLength` bits
 * (FAILED_AUTH_IPV6_PREFIX, 64 by default), written `2001:db8:1:2::/64`. One subscriber is handed a
 * whole /64 and can rotate through it freely: counted per address, it would never be blocked.
 * Anything that does not parse is counted as it is. A client that closed its connection before its
 * key was checked has no address any more (Node forgets a destroyed socket's): counted as `unknown`.
 */
export function failedAuthSubject(address: string | undefined, ipv6PrefixLength: number): string {
  if (address === undefined) return 'unknown';
  // Every authenticated request asks: an IPv4 address (the usual case) is not parsed.
  if (!address.includes(':') || !ipaddr.isValid(address)) return address;
  try {
    const parsed = ipaddr.process(address); // ::ffff:192.0.2.1 becomes 192.0.2.1
    if (parsed.kind() === 'ipv4' || ipv6PrefixLength >= 128) return parsed.toString();
    const network = ipaddr.IPv6.networkAddressFromCIDR(`${parsed.toString()}/${ipv6PrefixLength}`);
    return `${network.toString()}/${ipv6PrefixLength}`;
  } catch {
    return address; // a zone index, say: counted as it is
  }
}
