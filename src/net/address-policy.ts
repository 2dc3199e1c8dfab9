import ipaddr from 'ipaddr.js';

/**
 * Which IP addresses the service may connect to when it fetches a URL that
 * someone else gave it (a reference image, a provider's result). Only public
 * unicast addresses, as ipaddr.js classifies them, are allowed: loopback,
 * private (RFC 1918), link-local, unique-local, carrier-grade NAT, unspecified,
 * broadcast, multicast, reserved and documentation ranges, and the IPv6
 * ranges that embed an IPv4 address (NAT64, 6to4, Teredo) are refused.
 * IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) are judged as the IPv4
 * address they carry.
 *
 * An operator may allow ranges on purpose (an internal image mirror): those
 * CIDRs are allowed whatever their class, except the cloud instance-metadata
 * endpoints, which are never allowed.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Range = [Address, number];

/** Cloud instance-metadata and credential endpoints (AWS, GCP, Azure, ECS, EKS, Alibaba). */
const metadataAddresses: readonly Address[] = [
  '169.254.169.254',
  '169.254.170.2',
  '169.254.170.23',
  'fd00:ec2::254',
  'fd00:ec2::23',
  '100.100.100.200',
].map((a) => ipaddr.parse(a));

type AddressVerdict = { allowed: true } | { allowed: false; range: string };

export class AddressPolicy {
  private readonly allowed: readonly Range[];
  private readonly publicAllowed: boolean;

  /**
   * `allowCidrs`: ranges allowed on purpose, as `10.20.0.0/16`, `fd12::/64` or a single address.
   * `only`: those ranges and nothing else (not even public addresses).
   */
  constructor(allowCidrs: readonly string[] = [], options: { only?: boolean } = {}) {
    this.allowed = allowCidrs.map(parseRange);
    this.publicAllowed = !options.only;
  }

  /** Whether the service may connect to this address (a literal IPv4 or IPv6 address). */
  check(address: string): AddressVerdict {
    if (!ipaddr.isValid(address)) return { allowed: false, range: 'not an IP address' };
    const ip = normalise(ipaddr.parse(address));
    if (
      metadataAddresses.some(
        (m) => m.kind() === ip.kind() && m.toNormalizedString() === ip.toNormalizedString(),
      )
    )
      return { allowed: false, range: 'cloud metadata' };
    if (this.allowed.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits)))
      return { allowed: true };
    const range = rangeOf(ip);
    if (range !== 'unicast') return { allowed: false, range };
    return this.publicAllowed ? { allowed: true } : { allowed: false, range: 'public' };
  }
}

/** Whether a string is an address range `parseRange` takes (for configuration). */
export function isValidRange(value: string): boolean {
  return isCidr(value) || isAddress(value);
}

/** Strict notations only: `10.0.0.0/8`, not ipaddr.js's lenient `10.0/8` or `0xa.0.0.0`. */
const isCidr = (value: string) =>
  ipaddr.IPv4.isValidCIDRFourPartDecimal(value) || ipaddr.IPv6.isValidCIDR(value);
const isAddress = (value: string) => ipaddr.IPv4.isValidFourPartDecimal(value) || ipaddr.IPv6.isValid(value);

function parseRange(value: string): Range {
  if (isCidr(value)) {
    const [net, bits] = ipaddr.parseCIDR(value);
    // ::ffff:10.0.0.0/104 means 10.0.0.0/8: addresses are judged in their IPv4 form.
    if (net.kind() === 'ipv6' && (net as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96)
      return [(net as ipaddr.IPv6).toIPv4Address(), bits - 96];
    return [net, bits];
  }
  if (isAddress(value)) {
    const ip = normalise(ipaddr.parse(value));
    return [ip, ip.kind() === 'ipv4' ? 32 : 128];
  }
  throw new Error(`not an address range: ${value}`);
}

/** IPv4-mapped IPv6 addresses are the IPv4 address they carry. */
function normalise(ip: Address): Address {
  return ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()
    ? (ip as ipaddr.IPv6).toIPv4Address()
    : ip;
}

function rangeOf(ip: Address): string {
  const range = ip.range();
  // The deprecated IPv4-compatible form (::a.b.c.d, RFC 4291) is not a class of its own in
  // ipaddr.js, which calls it unicast; some stacks still route it to the IPv4 address.
  if (
    range === 'unicast' &&
    ip.kind() === 'ipv6' &&
    ip
      .toByteArray()
      .slice(0, 12)
      .every((b) => b === 0)
  )
    return 'ipv4Compatible';
  return range;
}
