import { sql } from 'slonik';
import { z } from 'zod';
import { createDatabasePool } from '../src/db/pool.js';
import { startScript, stopChild } from '../src/dev/child-processes.js';
import type { AuthServers } from './auth-servers.js';
import { benchDatabase, cpuMs, load, median, medianRun, printTable, type LoadResult } from './support.js';

/**
 * npm run bench:auth — authenticated GET /v1/credits (key check, per-key rate
 * limit, request log, balance) against a bare Fastify route answering the same
 * body, on the same machine, at 64 connections. Target: ours ≥ 0.5 × bare.
 *
 * The two are run in alternating rounds and the median round of each is
 * reported: on a small shared machine one run alone is noisy. Alongside, the
 * CPU each request cost the server process and PostgreSQL (the request log's
 * writes) shows where the time goes.
 *
 * BENCH_SECONDS (default 10) per run, BENCH_ROUNDS (default 5), BENCH_CONNECTIONS (default 64).
 */
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 64);
const database = await benchDatabase();
const { child, ready } = startScript<AuthServers>('bench/auth-servers.ts', {
  env: { ...process.env, DATABASE_URL: database.url },
});
const info = await ready;
try {
  const targets = {
    bare: { label: 'bare Fastify GET /bare', url: `http://127.0.0.1:${info.barePort}/bare`, headers: {} },
    ours: {
      label: 'authenticated GET /v1/credits',
      url: `http://127.0.0.1:${info.apiPort}/v1/credits`,
      headers: { authorization: `Bearer ${info.key}` },
    },
  };
  const runs: Record<keyof typeof targets, Array<LoadResult & { serverUs: number; postgresUs: number }>> = {
    bare: [],
    ours: [],
  };
  for (const target of Object.values(targets))
    await load('warm-up', { url: target.url, headers: target.headers, connections, duration: 2 });
  for (let round = 0; round < rounds; round++) {
    for (const [name, target] of Object.entries(targets) as Array<
      [keyof typeof targets, (typeof targets)['bare']]
    >) {
      const [server0, postgres0] = [await cpuMs('bench/auth-servers'), await cpuMs('postgres')];
      const result = await load(target.label, {
        url: target.url,
        headers: target.headers,
        connections,
        duration: seconds,
      });
      await new Promise((r) => setTimeout(r, 1200)); // let the request log's last flush land in the figures
      const [server1, postgres1] = [await cpuMs('bench/auth-servers'), await cpuMs('postgres')];
      runs[name].push({
        ...result,
        serverUs: Math.round(((server1 - server0) * 1000) / result.requests),
        postgresUs: Math.round(((postgres1 - postgres0) * 1000) / result.requests),
      });
    }
  }
  const bare = medianRun(runs.bare);
  const ours = medianRun(runs.ours);
  console.log(
    `\n${connections} connections, ${rounds} alternating rounds of ${seconds} s, loopback, ${database.embedded ? 'embedded PostgreSQL' : 'DATABASE_URL'}, ${process.env.BENCH_CPUS ?? 'all'} cores shared by load generator, server and PostgreSQL`,
  );
  console.log(
    `rounds, req/s: bare ${runs.bare.map((r) => r.requestsPerSecond.toFixed(0)).join(' / ')}; ours ${runs.ours.map((r) => r.requestsPerSecond.toFixed(0)).join(' / ')}\n`,
  );
  printTable([bare, ours], ['serverUs', 'postgresUs']);
  const ratio = ours.requestsPerSecond / bare.requestsPerSecond;
  const roundRatios = runs.ours.map((r, i) => r.requestsPerSecond / runs.bare[i]!.requestsPerSecond);
  console.log(
    `\n(serverUs, postgresUs: CPU microseconds per request in the server process and in PostgreSQL)`,
  );
  console.log(
    `ratio (authenticated / bare), median rounds: ${ratio.toFixed(2)}   per round: ${roundRatios.map((r) => r.toFixed(2)).join(', ')} (median ${median(roundRatios).toFixed(2)})   target ≥ 0.50`,
  );

  const pool = await createDatabasePool(database.url, { maximumPoolSize: 1 });
  const logged = await pool.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`SELECT count(*)::int AS n FROM api_request_log WHERE account_id = ${info.accountId}`,
  );
  await pool.end();
  const sent = [...runs.ours].reduce((n, r) => n + r.requests, 0);
  console.log(`request log: ${logged} rows for ${sent} measured requests (warm-up included in the rows)`);
} finally {
  await stopChild(child);
  await database.stop();
}
