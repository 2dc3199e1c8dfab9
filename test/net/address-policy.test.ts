import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/service-config.js';
import { AddressPolicy, isValidRange } from '../../src/net/address-policy.js';
import { webhookTarget } from '../../src/net/webhook-target.js';

describe('AddressPolicy: where an outbound fetch may connect', () => {
  const policy = new AddressPolicy();

  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.1.1', 'linkLocal'],
    ['fe80::1', 'linkLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.10', 'reserved'],
    ['2001:db8::1', 'reserved'],
    // Cloud metadata endpoints, IPv4 and IPv6.
    ['169.254.169.254', 'cloud metadata'],
    ['fd00:ec2::254', 'cloud metadata'],
    ['100.100.100.200', 'cloud metadata'],
    // IPv4-mapped IPv6 is judged as the IPv4 address it carries.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'cloud metadata'],
    // IPv6 forms that reach an IPv4 address through a translator, and the old IPv4-compatible form.
    ['64:ff9b::a00:1', 'rfc6052'],
    ['2002:a00:1::', '6to4'],
    ['::7f00:1', 'ipv4Compatible'],
    ['not-an-address', 'not an IP address'],
  ])('refuses %s (%s)', (address, range) => {
    expect(policy.check(address)).toEqual({ allowed: false, range });
  });

  it.each(['93.184.215.14', '8.8.8.8', '2606:4700::1111', '::ffff:93.184.215.14'])(
    'allows public %s',
    (address) => {
      expect(policy.check(address)).toEqual({ allowed: true });
    },
  );

  it('an allow-list opens ranges on purpose, in either notation, but never the metadata endpoints', () => {
    const internal = new AddressPolicy([
      '10.20.0.0/16',
      '127.0.0.1',
      'fd12::/64',
      '169.254.0.0/16',
      '::ffff:192.168.0.0/112',
    ]);
    expect(internal.check('10.20.5.5')).toEqual({ allowed: true });
    expect(internal.check('::ffff:10.20.5.5')).toEqual({ allowed: true });
    expect(internal.check('10.21.0.1')).toEqual({ allowed: false, range: 'private' });
    expect(internal.check('127.0.0.1')).toEqual({ allowed: true });
    expect(internal.check('127.0.0.2')).toEqual({ allowed: false, range: 'loopback' });
    expect(internal.check('fd12::9')).toEqual({ allowed: true });
    expect(internal.check('192.168.3.4')).toEqual({ allowed: true });
    expect(internal.check('169.254.10.10')).toEqual({ allowed: true });
    expect(internal.check('169.254.169.254')).toEqual({ allowed: false, range: 'cloud metadata' });
  });

  it('says which allow-list entries it takes', () => {
    expect(['10.0.0.0/8', '::1', 'fd00::/8', '127.0.0.1'].every(isValidRange)).toBe(true);
    expect(['10.0.0.0/33', 'example.com', '', '10.0.0'].some(isValidRange)).toBe(false);
    expect(() => new AddressPolicy(['example.com'])).toThrow(/not an address range/);
  });

  it('OUTBOUND_ALLOW_CIDRS: empty by default, comma-separated ranges, refused when it is not one', () => {
    const base = { DATABASE_URL: 'postgres://u:p@db:5432/app', TEMPORAL_ADDRESS: 'temporal:7233' };
    expect(loadConfig(base).OUTBOUND_ALLOW_CIDRS).toEqual([]);
    expect(
      loadConfig({ ...base, OUTBOUND_ALLOW_CIDRS: '10.20.0.0/16, fd12::/64,192.168.1.5' })
        .OUTBOUND_ALLOW_CIDRS,
    ).toEqual(['10.20.0.0/16', 'fd12::/64', '192.168.1.5']);
    expect(() => loadConfig({ ...base, OUTBOUND_ALLOW_CIDRS: '10.0.0.0/8,intranet.local' })).toThrow(
      ConfigError,
    );
    expect(() => loadConfig({ ...base, OUTBOUND_ALLOW_CIDRS: '10.0.0.0/8,intranet.local' })).toThrow(
      /OUTBOUND_ALLOW_CIDRS/,
    );
  });

  it('webhooks: their own allow-list, none by default; plain http on loopback only when asked (npm start)', () => {
    const base = { DATABASE_URL: 'postgres://u:p@db:5432/app', TEMPORAL_ADDRESS: 'temporal:7233' };
    const config = loadConfig({ ...base, OUTBOUND_ALLOW_CIDRS: '10.20.0.0/16' });
    expect(config).toMatchObject({
      WEBHOOK_ALLOW_CIDRS: [],
      WEBHOOK_ALLOW_LOOPBACK_HTTP: false,
      WEBHOOK_DNS_SERVERS: [],
      WEBHOOK_DNS_TIMEOUT_MS: 3_000,
      WEBHOOK_DNS_MAX_IN_FLIGHT: 64,
    });
    expect(
      loadConfig({ ...base, WEBHOOK_DNS_SERVERS: '1.1.1.1, 127.0.0.1:5353,[::1]:53' }).WEBHOOK_DNS_SERVERS,
    ).toEqual(['1.1.1.1', '127.0.0.1:5353', '[::1]:53']);
    expect(() => loadConfig({ ...base, WEBHOOK_DNS_SERVERS: 'dns.example.com' })).toThrow(
      /WEBHOOK_DNS_SERVERS/,
    );
    expect(() => loadConfig({ ...base, WEBHOOK_ALLOW_CIDRS: 'intranet.local' })).toThrow(
      /WEBHOOK_ALLOW_CIDRS/,
    );
    const target = (url: string, rules: Parameters<typeof webhookTarget>[1]) => {
      const { schemes, policy } = webhookTarget(new URL(url), rules);
      return {
        schemes,
        loopback: policy.check('127.0.0.1').allowed,
        public: policy.check('93.184.215.14').allowed,
      };
    };
    // OUTBOUND_ALLOW_CIDRS is not among a webhook's rules; WEBHOOK_ALLOW_CIDRS is.
    expect(
      webhookTarget(new URL('https://x.test'), { allowCidrs: config.WEBHOOK_ALLOW_CIDRS }).policy.check(
        '10.20.0.1',
      ).allowed,
    ).toBe(false);
    expect(
      webhookTarget(new URL('https://x.test'), { allowCidrs: ['10.20.0.0/16'] }).policy.check('10.20.0.1')
        .allowed,
    ).toBe(true);
    expect(target('http://localhost/hook', { allowCidrs: [] })).toEqual({
      schemes: ['https:'],
      loopback: false,
      public: true,
    });
    expect(target('http://localhost/hook', { allowCidrs: [], allowLoopbackHttp: true })).toEqual({
      schemes: ['http:'],
      loopback: true,
      public: false,
    });
    expect(target('https://localhost/hook', { allowCidrs: [], allowLoopbackHttp: true })).toEqual({
      schemes: ['https:'],
      loopback: true,
      public: true,
    });
  });
});
