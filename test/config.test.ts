import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CommonQueryMethods } from 'slonik';
import { ConfigError, loadConfig } from '../src/config/service-config.js';
import { createLogger } from '../src/process/logger.js';
import { activityDeps } from '../src/worker/worker-deps.js';
import { temporalConnectionOptions } from '../src/temporal/connection-options.js';

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

  it('SUBMIT_CLAIM_WINDOW_MS: 60 s by default, never under 25 s, and the worker’s submit steps take it', () => {
    const windowOf = (env: Record<string, string>) =>
      activityDeps(
        loadConfig({ ...base, ...env }),
        {} as CommonQueryMethods,
        createLogger('test', 'silent'),
        {
          temporal: () => Promise.reject(new Error('not used')),
        },
      ).deps.submitClaimWindowMs;
    expect(windowOf({})).toBe(60_000);
    expect(windowOf({ SUBMIT_CLAIM_WINDOW_MS: '25000' })).toBe(25_000);
    // Shorter than the providers' create deadline (20 s), a create's answer could outlive its claim.
    expect(() => loadConfig({ ...base, SUBMIT_CLAIM_WINDOW_MS: '20000' })).toThrow(/SUBMIT_CLAIM_WINDOW_MS/);
  });

  describe('Temporal security', () => {
    const options = (env: Record<string, string>) => {
      const config = loadConfig({ ...base, ...env });
      return temporalConnectionOptions(config.TEMPORAL_ADDRESS, config);
    };
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig({ ...base, ...env });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      throw new Error(`${JSON.stringify(env)} was accepted`);
    };
    const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----';

    it('is plaintext by default, and TLS once anything asks for it (an API key included)', () => {
      expect(options({})).toEqual({ address: 'temporal:7233' });
      expect(options({ TEMPORAL_TLS: 'true' })).toEqual({ address: 'temporal:7233', tls: {} });
      expect(options({ TEMPORAL_API_KEY: 'k' })).toEqual({ address: 'temporal:7233', tls: {}, apiKey: 'k' });
      expect(options({ TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false' })).toEqual({
        address: 'temporal:7233',
        apiKey: 'k',
      });
      expect(options({ TEMPORAL_TLS_SERVER_NAME: 'frontend.internal' }).tls).toEqual({
        serverNameOverride: 'frontend.internal',
      });
    });

    it('takes certificates as PEM text or as a file path', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'config-pem-'));
      try {
        await writeFile(path.join(dir, 'key.pem'), 'KEY FROM FILE');
        const tls = options({ TEMPORAL_TLS_CERT: pem, TEMPORAL_TLS_KEY: path.join(dir, 'key.pem') }).tls;
        expect(Buffer.from(tls!.clientCertPair!.crt).toString()).toBe(`${pem}\n`);
        expect(Buffer.from(tls!.clientCertPair!.key).toString()).toBe('KEY FROM FILE');
        // From an .env file: the line breaks as the two characters \n.
        const oneLine = pem.replaceAll('\n', '\\n');
        expect(
          Buffer.from(options({ TEMPORAL_TLS_CA: oneLine }).tls!.serverRootCACertificate!).toString(),
        ).toBe(`${pem}\n`);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('refuses half a client certificate, an unreadable file, and TLS settings with TLS off', () => {
      expect(refusal({ TEMPORAL_TLS_CERT: pem })).toContain('TEMPORAL_TLS_KEY: mTLS needs');
      expect(refusal({ TEMPORAL_TLS_CA: '/nonexistent/ca.pem' })).toContain(
        'TEMPORAL_TLS_CA: is not PEM text, and no file of that name can be read (ENOENT)',
      );
      // A key in a form we do not read (here base64) is never repeated in the message.
      const encoded = Buffer.from(pem).toString('base64');
      expect(refusal({ TEMPORAL_TLS_CERT: pem, TEMPORAL_TLS_KEY: encoded })).not.toContain(encoded);
      expect(refusal({ TEMPORAL_TLS: 'false', TEMPORAL_TLS_CA: pem })).toContain(
        'TEMPORAL_TLS: false, yet TEMPORAL_TLS_CA is set',
      );
    });
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
