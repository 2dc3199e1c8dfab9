import { Redis } from 'ioredis';
import { sql } from 'slonik';
import { z } from 'zod';
import { createDatabasePool } from '../src/db/pool.js';
import { startScript, stopChild } from '../src/dev/child-processes.js';
import { freePort } from '../src/dev/free-port.js';
import { startValkeyServer, valkeyServerPath } from '../src/dev/valkey-server.js';
import type { AuthServers } from './auth-servers.js';
import { cpuBySource } from './process-cpu.js';
import { benchDatabase, load, median, medianRun, printTable, type LoadResult } from './support.js';

/**
 * npm run bench:auth — authenticated GET /v1/credits (key check, per-key rate
 * limit, request log, balance) against a bare Fastify route answering the same
 * body, on the same machine, at 64 connections. Target: ours ≥ 0.5 × bare, with
 * the limits counted in memory (no REDIS_URL) and in Redis (REDIS_URL) alike.
 *
 * The three are run in alternating rounds and the median round of each is
 * reported: on a small shared machine one run alone is noisy. Alongside, the
 * CPU each request cost the server process, PostgreSQL (the request log's
 * writes) and Redis shows where the time goes.
 *
 * Redis: REDIS_URL if set, else a valkey-server started here (fetched once,
 * like the tests' one). BENCH_SECONDS (default 10) per run, BENCH_ROUNDS
 * (default 5), BENCH_CONNECTIONS (default 64).
 */
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 64);
const database = await benchDatabase();
const valkey = process.env.REDIS_URL
  ? undefined
  : await startValkeyServer({ binary: await valkeyServerPath(), port: await freePort() });
const redisUrl = process.env.REDIS_URL ?? valkey!.url;
// Only the server started here is measured; an external one's CPU is not ours to see.
const redisPid = valkey?.process.pid;
const { child, ready } = startScript<AuthServers>('bench/auth-servers.ts', {
  env: { ...process.env, DATABASE_URL: database.url, BENCH_REDIS_URL: redisUrl },
});
const info = await ready;
const scriptCalls0 = await scriptCallsOf(redisUrl);
try {
  const authorization = { authorization: `Bearer ${info.key}` };
  const targets = {
    bare: { label: 'bare Fastify GET /bare', url: `http://127.0.0.1:${info.barePort}/bare`, headers: {} },
    ours: {
      label: 'GET /v1/credits, limits in memory',
      url: `http://127.0.0.1:${info.apiPort}/v1/credits`,
      headers: authorization,
    },
    redis: {
      label: 'GET /v1/credits, limits in Redis',
      url: `http://127.0.0.1:${info.redisApiPort}/v1/credits`,
      headers: authorization,
    },
  };
  type Run = LoadResult & { serverUs: number; postgresUs: number; redisUs: number | string };
  const runs: Record<keyof typeof targets, Run[]> = { bare: [], ours: [], redis: [] };
  // Only the processes started here: other people's PostgreSQL and servers on the machine are not counted.
  const cpu = () =>
    cpuBySource({
      server: { pid: child.pid },
      postgres: { pid: database.pid },
      redis: { pid: redisPid },
    });
  for (const target of Object.values(targets))
    await load('warm-up', { url: target.url, headers: target.headers, connections, duration: 2 });
  for (let round = 0; round < rounds; round++) {
    for (const [name, target] of Object.entries(targets) as Array<
      [keyof typeof targets, (typeof targets)['bare']]
    >) {
      const before = await cpu();
      const result = await load(target.label, {
        url: target.url,
        headers: target.headers,
        connections,
        duration: seconds,
      });
      await new Promise((r) => setTimeout(r, 1200)); // let the request log's last flush land in the figures
      const after = await cpu();
      const perRequestUs = (name: keyof typeof after) =>
        Math.round(((after[name] - before[name]) * 1000) / result.requests);
      runs[name].push({
        ...result,
        serverUs: perRequestUs('server'),
        postgresUs: perRequestUs('postgres'),
        redisUs: redisPid === undefined ? '-' : perRequestUs('redis'),
      });
    }
  }
  const bare = medianRun(runs.bare);
  const ours = medianRun(runs.ours);
  const withRedis = medianRun(runs.redis);
  const perRound = (variant: Run[]) => variant.map((r) => r.requestsPerSecond.toFixed(0)).join(' / ');
  console.log(
    `\n${connections} connections, ${rounds} alternating rounds of ${seconds} s, loopback, ${database.embedded ? 'embedded PostgreSQL' : 'DATABASE_URL'}, ${valkey ? 'valkey-server started here' : 'REDIS_URL'}, ${process.env.BENCH_CPUS ?? 'all'} cores shared by load generator, server, PostgreSQL and Redis`,
  );
  console.log(
    `rounds, req/s: bare ${perRound(runs.bare)}; in memory ${perRound(runs.ours)}; in Redis ${perRound(runs.redis)}\n`,
  );
  printTable([bare, ours, withRedis], ['serverUs', 'postgresUs', 'redisUs']);
  console.log(
    `\n(serverUs, postgresUs, redisUs: CPU microseconds per request in the server process, PostgreSQL and Redis)`,
  );
  for (const [label, variant, median_] of [
    ['limits in memory', runs.ours, ours],
    ['limits in Redis ', runs.redis, withRedis],
  ] as const) {
    const ratio = median_.requestsPerSecond / bare.requestsPerSecond;
    const roundRatios = variant.map((r, i) => r.requestsPerSecond / runs.bare[i]!.requestsPerSecond);
    console.log(
      `ratio (authenticated / bare), ${label}: median rounds ${ratio.toFixed(2)}   per round: ${roundRatios.map((r) => r.toFixed(2)).join(', ')} (median ${median(roundRatios).toFixed(2)})   target ≥ 0.50`,
    );
  }

  const pool = await createDatabasePool(database.url, { maximumPoolSize: 1 });
  const logged = await pool.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`SELECT count(*)::int AS n FROM api_request_log WHERE account_id = ${info.accountId}`,
  );
  await pool.end();
  const sent = [...runs.ours, ...runs.redis].reduce((n, r) => n + r.requests, 0);
  console.log(`request log: ${logged} rows for ${sent} measured requests (warm-up included in the rows)`);
  // Proof that the Redis variant counted in Redis, not in its in-memory fallback: one script call per request.
  const scriptCalls = (await scriptCallsOf(redisUrl)) - scriptCalls0;
  const sentToRedis = runs.redis.reduce((n, r) => n + r.requests, 0);
  console.log(
    `Redis ran the limits script ${scriptCalls} times for ${sentToRedis} measured requests to the Redis variant (warm-up included in the calls)`,
  );
} finally {
  await stopChild(child);
  await valkey?.stop();
  await database.stop();
}

/** EVALSHA and EVAL calls Redis has answered since it started (INFO commandstats). */
async function scriptCallsOf(url: string): Promise<number> {
  const redis = new Redis(url);
  try {
    const stats = await redis.info('commandstats');
    return [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  } finally {
    redis.disconnect();
  }
}
