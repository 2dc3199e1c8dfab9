import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { generateApiKey } from '../../src/auth/api-key.js';
import { revokeApiKey } from '../../src/db/api-keys-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { waitFor } from '../support/wait.js';

/**
 * Who the client is (TRUST_PROXY), as the failed-authentication limit (20 per minute per IP) and the
 * request log see it. Addresses are from the documentation ranges; `remoteAddress` is the TCP peer.
 */
describe('the client address behind proxies, and the failed-authentication limit', () => {
  let db: TestDatabase;
  let alice: TestAccount;
  const apis: ApiService[] = [];

  /** The real API with TRUST_PROXY set, and a public probe route that answers the address it sees. */
  async function apiTrusting(trustProxy: string): Promise<ApiService> {
    const api = await startTestApi(db.url, { TRUST_PROXY: trustProxy }, (app) => {
      app.get('/v1/probe/client', { config: { public: true } }, (request) => ({ ip: request.ip }));
    });
    apis.push(api);
    return api;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    alice = await createPaidAccount(db.pool);
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await db?.drop();
  });

  describe('behind one load balancer (TRUST_PROXY=1)', () => {
    let api: ApiService;
    const balancer = '10.9.0.1';
    beforeAll(async () => {
      api = await apiTrusting('1');
    });

    /** A request through the balancer, which appends the address it saw to what the client sent. */
    const viaBalancer = (client: string, key: string, clientWritten?: string) =>
      api.app.inject({
        method: 'GET',
        url: '/v1/credits',
        remoteAddress: balancer,
        headers: {
          ...bearer(key),
          'x-forwarded-for': clientWritten === undefined ? client : `${clientWritten}, ${client}`,
        },
      });

    it('takes the address the balancer appended, not what the client wrote', async () => {
      const probe = (headers: Record<string, string>, remoteAddress = balancer) =>
        api.app
          .inject({ method: 'GET', url: '/v1/probe/client', remoteAddress, headers })
          .then((r) => r.json<{ ip: string }>().ip);
      expect(await probe({ 'x-forwarded-for': '192.0.2.1, 198.51.100.4' })).toBe('198.51.100.4');
      expect(await probe({ 'x-forwarded-for': '198.51.100.4' })).toBe('198.51.100.4');
      expect(await probe({})).toBe(balancer);
    });

    it('a client cannot dodge the limit by writing a new X-Forwarded-For each time', async () => {
      const attacker = '203.0.113.7';
      for (let i = 0; i < 20; i++)
        expect((await viaBalancer(attacker, generateApiKey(), `198.51.100.${i}`)).statusCode).toBe(401);
      const next = await viaBalancer(attacker, generateApiKey(), '198.51.100.99');
      expect(next.statusCode).toBe(429);
      expect(next.json().error.code).toBe('rate_limited');
      expect((await viaBalancer(attacker, generateApiKey(), '198.51.100.100')).statusCode).toBe(429);
      expect((await viaBalancer(attacker, generateApiKey())).statusCode).toBe(429);
      // A key that works is not held back by its address's failures (issue 35 §6).
      expect((await viaBalancer(attacker, alice.key, '198.51.100.101')).statusCode).toBe(200);
    });

    it("a client cannot aim the limit at another client's address", async () => {
      const victim = '198.51.100.50';
      const attacker = '203.0.113.8';
      for (let i = 0; i < 25; i++) await viaBalancer(attacker, generateApiKey(), victim);
      expect((await viaBalancer(attacker, generateApiKey(), victim)).statusCode).toBe(429);
      // The victim's own failed attempt is counted, not refused: the attacker's failures were not its.
      expect((await viaBalancer(victim, generateApiKey())).statusCode).toBe(401);
      const own = await viaBalancer(victim, alice.key);
      expect(own.statusCode).toBe(200);
      expect(own.json().credits).toBe(100);
    });

    it("rule 12: a request the limit refuses still goes to the key's account log, under the client's address", async () => {
      const client = '203.0.113.9';
      const bob = await createPaidAccount(db.pool);
      await revokeApiKey(db.pool, bob.keyId);
      for (let i = 0; i < 20; i++) await viaBalancer(client, generateApiKey());
      const refusedUnknown = await viaBalancer(client, generateApiKey(), '192.0.2.200');
      const refusedRevoked = await viaBalancer(client, bob.key);
      expect([refusedUnknown.statusCode, refusedRevoked.statusCode]).toEqual([429, 429]);
      // The same answer for a revoked key as for one never issued: the refusal tells nothing of it.
      expect(refusedRevoked.json()).toEqual(refusedUnknown.json());
      // A key that works goes through (issue 35 §6), logged as any request.
      const passed = await viaBalancer(client, alice.key, '192.0.2.201');
      expect(passed.statusCode).toBe(200);

      const logged = (keyId: string) =>
        db.pool.any(
          sql.type(
            z.object({
              request_id: z.string(),
              status_code: z.number(),
              error_code: z.string().nullable(),
              ip: z.string().nullable(),
            }),
          )`SELECT request_id, status_code, error_code, ip FROM api_request_log
              WHERE api_key_id = ${keyId} AND status_code = 429`,
        );
      const rows = await waitFor(async () => {
        const b = await logged(bob.keyId);
        return b.length > 0 ? { bob: b } : null;
      });
      expect(rows.bob).toEqual([
        expect.objectContaining({
          request_id: refusedRevoked.headers['x-request-id'],
          error_code: 'rate_limited',
          ip: client,
        }),
      ]);
    });
  });

  describe('behind known proxies (TRUST_PROXY=10.9.0.0/16, 2001:db8:9::/48)', () => {
    let api: ApiService;
    beforeAll(async () => {
      api = await apiTrusting('10.9.0.0/16, 2001:db8:9::/48');
    });
    const seen = (remoteAddress: string, forwardedFor?: string) =>
      api.app
        .inject({
          method: 'GET',
          url: '/v1/probe/client',
          remoteAddress,
          headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
        })
        .then((r) => r.json<{ ip: string }>().ip);

    it('believes X-Forwarded-For only as far as it was written by those proxies', async () => {
      expect(await seen('10.9.3.4', '192.0.2.1, 198.51.100.7')).toBe('198.51.100.7');
      // Through two of our proxies: the first address they did not write is the client.
      expect(await seen('10.9.0.1', '192.0.2.1, 198.51.100.7, 10.9.5.5')).toBe('198.51.100.7');
      expect(await seen('2001:db8:9::1', '198.51.100.7')).toBe('198.51.100.7');
      expect(await seen('::ffff:10.9.3.4', '198.51.100.7')).toBe('198.51.100.7');
      expect(await seen('10.9.3.4')).toBe('10.9.3.4');
    });

    it('ignores X-Forwarded-For from anyone else, whose own address counts against the limit', async () => {
      expect(await seen('192.0.2.10', '198.51.100.7')).toBe('192.0.2.10');
      expect(await seen('10.10.0.1', '198.51.100.7')).toBe('10.10.0.1');
      expect(await seen('2001:db8:a::1', '198.51.100.7')).toBe('2001:db8:a::1');

      const direct = (forwardedFor: string, key: string) =>
        api.app.inject({
          method: 'GET',
          url: '/v1/credits',
          remoteAddress: '192.0.2.11',
          headers: { ...bearer(key), 'x-forwarded-for': forwardedFor },
        });
      for (let i = 0; i < 20; i++)
        expect((await direct(`198.51.100.${i}`, generateApiKey())).statusCode).toBe(401);
      expect((await direct('198.51.100.99', generateApiKey())).statusCode).toBe(429);
    });
  });
});
