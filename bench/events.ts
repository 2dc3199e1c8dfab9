import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { selfSignedLoopbackCertificate } from '../test/support/test-certificates.js';
import { cpuBySource } from './process-cpu.js';
import { benchRuntime, startStack } from './stack.js';
import { createGenerations, percentile, printColumns, rssKb } from './support.js';
import { loadAverage } from './targets.js';

/**
 * npm run bench:events — issue 30's figures for the event stream and webhooks, on one API process:
 * (a) BENCH_STREAMS (1,000) open `GET /v1/generations/{id}/events` streams (Server-Sent Events) at
 * rest: the API's RSS and CPU with them open against without; (b) the time from a change (the
 * event's created_at, its transaction's time) to its SSE event at the client, p50/p95 (target p50
 * ≤ 50 ms); (c) the time from the same changes to the first delivery attempt reaching a webhook
 * receiver on loopback (HTTPS), p50/p95 (target p50 ≤ 500 ms). The changes are BENCH_GENERATIONS
 * (120) generations finishing over 10 s, each with a webhook (the default events) and its share of
 * the streams. Figures are printed, never asserted: the machine is shared, read CPU beside latency.
 */
const streamCount = Number(process.env.BENCH_STREAMS ?? 1000);
const generationCount = Number(process.env.BENCH_GENERATIONS ?? 120);
const slowSeconds = Number(process.env.BENCH_SLOW_SECONDS ?? 45);
const restSeconds = Number(process.env.BENCH_REST_SECONDS ?? 15);

const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-events-'));
const certificate = await selfSignedLoopbackCertificate();
const caFile = path.join(scratch, 'receiver-ca.pem');
await writeFile(caFile, certificate.cert);

/** First arrival of each webhook-id at the receiver (retries and redeliveries are not counted). */
const firstDelivery = new Map<string, { at: number; createdAt: string; type: string }>();
let deliveryRequests = 0;
const receiver = https.createServer({ key: certificate.key, cert: certificate.cert }, (request, response) => {
  const at = Date.now();
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    deliveryRequests++;
    const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { created_at: string; type: string };
    const id = String(request.headers['webhook-id']);
    if (!firstDelivery.has(id)) firstDelivery.set(id, { at, createdAt: event.created_at, type: event.type });
    // Answered at once, as a receiver should: the latency measured is ours.
    response.writeHead(204).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const webhookUrl = `https://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

const stack = await startStack({
  // The caps are raised so that the bench's streams all open on one process and one key.
  EVENT_STREAMS_PER_KEY: String(streamCount * 10),
  EVENT_STREAMS_PER_PROCESS: String(streamCount * 10),
  PROVIDER_POLL_INTERVAL_MS: '200',
  // The receiver is on loopback with its own certificate: allowed as a private receiver would be.
  WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
  NODE_EXTRA_CA_CERTS: caFile,
});
const auth = { authorization: `Bearer ${stack.key}` };
const api = { api: { pid: stack.apiPid } };

/** The API's CPU (ms) over `seconds` of rest, and its RSS at the end. */
async function atRest(seconds: number): Promise<{ cpuMs: number; rssKb: number }> {
  const before = await cpuBySource(api);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const after = await cpuBySource(api);
  return { cpuMs: after.api - before.api, rssKb: await rssKb(stack.apiPid) };
}

/** The batch, each generation with a webhook to the receiver. */
const createBatch = (label: string, count: number, slow: (i: number) => number) =>
  createGenerations(stack, label, count, (i) => ({
    model: 'lumen-lite',
    prompt: `${label} ${i} [sim:slow=${slow(i).toFixed(2)}]`,
    webhook: { url: webhookUrl },
  }));

interface Stream {
  /** Resolves once the server has sent its first bytes (the stream is registered). */
  opened: Promise<void>;
  /** Resolves when the server ends the stream (after the terminal event). */
  ended: Promise<void>;
  /** Each event that arrived after the stream opened: its lateness behind its created_at, in ms. */
  live: { key: string; lateMs: number }[];
  close(): void;
}

/** One SSE stream on a connection of its own (as 1,000 separate clients would hold them). */
function openStream(generationId: string): Stream {
  const live: Stream['live'] = [];
  let openedAt = Infinity;
  let markOpened!: () => void;
  let markEnded!: () => void;
  const opened = new Promise<void>((resolve) => (markOpened = resolve));
  const ended = new Promise<void>((resolve) => (markEnded = resolve));
  const url = new URL(`${stack.apiUrl}/generations/${generationId}/events`);
  const request = http.get(
    url,
    { agent: false, headers: { ...auth, accept: 'text/event-stream' } },
    (response) => {
      if (response.statusCode !== 200) console.error(`stream ${generationId}: ${response.statusCode}`);
      response.setEncoding('utf8');
      let buffer = '';
      response.on('data', (text: string) => {
        const at = Date.now();
        if (openedAt === Infinity) {
          openedAt = at;
          markOpened();
        }
        buffer += text;
        for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
          const data = buffer
            .slice(0, cut)
            .split('\n')
            .find((line) => line.startsWith('data: '));
          buffer = buffer.slice(cut + 2);
          if (!data) continue;
          const event = JSON.parse(data.slice(6)) as { id: number; created_at: string };
          const created = Date.parse(event.created_at);
          // Events written before the stream opened were read from the log, not woken: not counted.
          if (created > openedAt) live.push({ key: `${generationId}:${event.id}`, lateMs: at - created });
        }
      });
      response.on('end', markEnded);
      response.on('close', markEnded);
    },
  );
  request.on('error', (error) => {
    console.error(`stream ${generationId}: ${error.message}`);
    markOpened();
    markEnded();
  });
  return { opened, ended, live, close: () => request.destroy() };
}

const streams: Stream[] = [];
try {
  console.log(`load average at start: ${await loadAverage()}   runtime: ${benchRuntime}`);
  // Warm the API, the worker and the delivery path up (JIT, pools, one stream, one delivery).
  const [warm] = await createBatch('warm-up', 1, () => 1);
  const warmStream = openStream(warm!);
  await warmStream.ended;
  const warmDeadline = Date.now() + 30_000;
  while (firstDelivery.size === 0 && Date.now() < warmDeadline) await new Promise((r) => setTimeout(r, 100));
  firstDelivery.clear();

  // (a) Rest without streams, then with them.
  const without = await atRest(restSeconds);
  const ids = await createBatch('events', generationCount, (i) => slowSeconds + (i * 10) / generationCount);
  const createdAllAt = Date.now();
  const cpuBeforeOpen = await cpuBySource(api);
  for (let i = 0; i < streamCount; i++) {
    streams.push(openStream(ids[i % ids.length]!));
    // A few at a time, as clients arrive, not one burst of 1,000 connections.
    if (i % 50 === 49) await new Promise((r) => setTimeout(r, 20));
  }
  await Promise.all(streams.map((s) => s.opened));
  const openCpuMs = (await cpuBySource(api)).api - cpuBeforeOpen.api;
  const opened = Date.now();
  const withStreams = await atRest(restSeconds);
  if (Date.now() - createdAllAt > slowSeconds * 1000)
    console.warn(
      'warning: generations may have finished before the rest window ended (raise BENCH_SLOW_SECONDS)',
    );

  // (b), (c): the generations finish; every stream gets its generation's events, the receiver its deliveries.
  const finishStarted = Date.now();
  const cpuBeforeFinish = await cpuBySource(stack.processes);
  await Promise.race([Promise.all(streams.map((s) => s.ended)), new Promise((r) => setTimeout(r, 120_000))]);
  const deadline = Date.now() + 30_000;
  while (firstDelivery.size < ids.length && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 200));

  const cpuAfterFinish = await cpuBySource(stack.processes);
  const finishSeconds = (Date.now() - finishStarted) / 1000;
  const sse = streams.flatMap((s) => s.live);
  const changes = new Set(sse.map((e) => e.key));
  const hooks = [...firstDelivery.values()].map((d) => d.at - Date.parse(d.createdAt));

  console.log(
    `\n${streamCount} SSE streams on ${ids.length} generations (${slowSeconds}–${slowSeconds + 10} s each, webhooks to a loopback receiver), one API process\n`,
  );
  printColumns(48, [
    ['API process at rest', 'value'],
    ['RSS without streams (MB)', (without.rssKb / 1024).toFixed(1)],
    [`RSS with ${streamCount} streams open (MB)`, (withStreams.rssKb / 1024).toFixed(1)],
    ['RSS per stream (kB)', ((withStreams.rssKb - without.rssKb) / streamCount).toFixed(1)],
    [`CPU without streams (ms over ${restSeconds} s)`, without.cpuMs.toFixed(0)],
    [`CPU with the streams open (ms over ${restSeconds} s)`, withStreams.cpuMs.toFixed(0)],
    [`CPU to open them (ms, ${((opened - createdAllAt) / 1000).toFixed(1)} s)`, openCpuMs.toFixed(0)],
  ]);
  console.log('');
  printColumns(48, [
    ['change → client (ms)', 'p50', 'p95', 'max', 'samples', 'changes', 'target p50'],
    [
      'SSE event at an open stream',
      percentile(
        sse.map((e) => e.lateMs),
        50,
      ).toFixed(0),
      percentile(
        sse.map((e) => e.lateMs),
        95,
      ).toFixed(0),
      Math.max(...sse.map((e) => e.lateMs)).toFixed(0),
      String(sse.length),
      String(changes.size),
      '≤ 50',
    ],
    [
      'first webhook delivery attempt',
      percentile(hooks, 50).toFixed(0),
      percentile(hooks, 95).toFixed(0),
      Math.max(...hooks).toFixed(0),
      String(hooks.length),
      String(hooks.length),
      '≤ 500',
    ],
  ]);
  // Where the CPU went while the changes were delivered: a slow delivery is read beside these.
  console.log(
    `\nCPU while the generations finished and were delivered (${finishSeconds.toFixed(0)} s, ms per s): ` +
      Object.keys(cpuAfterFinish)
        .map((name) => {
          const key = name as keyof typeof cpuAfterFinish;
          return `${name} ${((cpuAfterFinish[key] - cpuBeforeFinish[key]) / finishSeconds).toFixed(0)}`;
        })
        .join(', '),
  );
  console.log(
    `\nA change's time is its event's created_at: its transaction's start (now()), so the figures include the commit.` +
      `\nDelivery requests received: ${deliveryRequests} for ${firstDelivery.size} events (retries counted apart).` +
      `\nload average at end: ${await loadAverage()}`,
  );
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  for (const s of streams) s.close();
  await stack.stop();
  receiver.close();
  await rm(scratch, { recursive: true, force: true });
}
