import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

describe('configuration', () => {
  const base = { DATABASE_URL: 'postgres://u:p@db:5432/app', TEMPORAL_ADDRESS: 'temporal:7233' };

  it('fills documented defaults and derives public URLs', () => {
    const config = loadConfig(base);
    expect(config).toMatchObject({
      API_PORT: 8080,
      API_PUBLIC_URL: 'http://127.0.0.1:8080/v1',
      RESULT_BASE_URL: 'http://127.0.0.1:8081',
      RATE_LIMIT_PER_MINUTE: 600,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: 'generations',
      TRUST_PROXY: false,
    });
    expect(loadConfig({ ...base, API_PUBLIC_URL: 'https://api.example.com/v1/' }).API_PUBLIC_URL).toBe(
      'https://api.example.com/v1',
    );
  });

  it('names every bad variable in one message', () => {
    let error: unknown;
    try {
      loadConfig({ DATABASE_URL: 'mysql://x', API_PORT: 'eighty', TRUST_PROXY: 'maybe' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'API_PORT', 'TRUST_PROXY'])
      expect(message).toContain(name);
  });

  describe('TRUST_PROXY', () => {
    const trustProxy = (value: string) => loadConfig({ ...base, TRUST_PROXY: value }).TRUST_PROXY;
    const refusal = (value: string) => {
      try {
        loadConfig({ ...base, TRUST_PROXY: value });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      throw new Error(`TRUST_PROXY=${value} was accepted`);
    };

    it('is false, a hop count, or a list of proxy addresses and CIDRs', () => {
      expect(trustProxy('false')).toBe(false);
      expect(trustProxy('0')).toBe(false);
      expect(trustProxy('1')).toBe(1);
      expect(trustProxy('2')).toBe(2);
      expect(trustProxy('10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,::1')).toEqual([
        '10.0.0.0/8',
        '192.0.2.7',
        '2001:db8::/32',
        '::1',
      ]);
    });

    it('refuses true, which would believe any client, naming the alternatives', () => {
      const message = refusal('true');
      expect(message).toContain('TRUST_PROXY');
      expect(message).toMatch(/false.*number of proxies.*CIDR/);
    });

    it('refuses entries that are not addresses or CIDRs, naming them', () => {
      for (const [value, bad] of [
        ['10.0.0.0/33', '"10.0.0.0/33"'],
        ['10.0.0.1, proxy.internal', '"proxy.internal"'],
        ['2001:db8::/129', '"2001:db8::/129"'],
        ['10.0.0.0/8/1', '"10.0.0.0/8/1"'],
        ['10.0.0.0/', '"10.0.0.0/"'],
        ['10.0.0.1,', '""'],
        ['-1', '"-1"'],
        ['yes', '"yes"'],
      ]) {
        const message = refusal(value!);
        expect(message, value).toContain('TRUST_PROXY');
        expect(message, value).toContain(bad);
      }
    });
  });

  it('HTTP timeouts: documented defaults, and the headers cannot be given longer than the whole request', () => {
    expect(loadConfig(base)).toMatchObject({
      API_REQUEST_TIMEOUT_MS: 60_000,
      API_HEADERS_TIMEOUT_MS: 10_000,
    });
    expect(() => loadConfig({ ...base, API_HEADERS_TIMEOUT_MS: '61000' })).toThrow(/API_HEADERS_TIMEOUT_MS/);
  });

  it('REDIS_URL: unset or blank means in-memory limits; otherwise a redis:// or rediss:// URL', () => {
    expect(loadConfig(base).REDIS_URL).toBeUndefined();
    expect(loadConfig(base).REDIS_TIMEOUT_MS).toBe(250);
    expect(loadConfig({ ...base, REDIS_URL: '  ' }).REDIS_URL).toBeUndefined();
    expect(loadConfig({ ...base, REDIS_URL: 'rediss://:secret@cache:6380/2' }).REDIS_URL).toBe(
      'rediss://:secret@cache:6380/2',
    );
    expect(() => loadConfig({ ...base, REDIS_URL: 'cache:6379' })).toThrow(/REDIS_URL: must be a redis:\/\//);
  });
});
