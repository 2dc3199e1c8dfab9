import { readdirSync, readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { bearer, createPaidAccount, type TestAccount } from '../support/api.js';
import { startApiProcess, type ApiProcess } from '../support/api-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { scrape } from '../support/prometheus.js';
import { waitFor } from '../support/wait.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

/** The API process's preview work at most (MCP_PREVIEW_CONCURRENCY). */
const cap = 2;

/**
 * The API's resident memory (VmRSS, bytes) and how many ffmpeg processes it has running. Read
 * synchronously: a scan of /proc takes about a millisecond so, and a short ffmpeg run is not missed.
 */
function sampleOf(pid: number): { rss: number; ffmpegs: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) * 1024;
  let ffmpegs = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // It ended meanwhile.
    }
    const close = stat.lastIndexOf(')');
    if (close < 0) continue;
    const name = stat.slice(stat.indexOf('(') + 1, close);
    const parent = Number(stat.slice(close + 2).split(' ')[1]);
    if (parent === pid && name.startsWith('ffmpeg')) ffmpegs++;
  }
  return { rss, ffmpegs };
}

/** Samples the API every few milliseconds while `work` runs: its peak RSS and most ffmpegs at once. */
async function measured<T>(pid: number, work: () => Promise<T>) {
  const before = sampleOf(pid);
  let peakRss = before.rss;
  let maxFfmpegs = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      const now = sampleOf(pid);
      peakRss = Math.max(peakRss, now.rss);
      maxFfmpegs = Math.max(maxFfmpegs, now.ffmpegs);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  try {
    const result = await work();
    return { result, rssGrowth: peakRss - before.rss, maxFfmpegs };
  } finally {
    running = false;
    await sampler;
  }
}

/**
 * Previews of finished results (an image's, a video's poster frame) through the real API process:
 * each is made once, by bounded work, and kept beside its file; later calls read it.
 */
describe('MCP previews', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiProcess;
  let metrics: string;
  let account: TestAccount;
  const clients: Client[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool, { simDelayMs: 50 });
    const port = await freePort();
    metrics = `http://127.0.0.1:${port}`;
    api = await startApiProcess({
      ...worker.apiEnv,
      DATABASE_URL: db.url,
      RATE_LIMIT_PER_MINUTE: '100000',
      METRICS_PORT: String(port),
      MCP_PREVIEW_CONCURRENCY: String(cap),
    });
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await api?.stop();
    await worker?.close();
    await db?.drop();
  });

  const connect = async () => {
    const client = new Client({ name: 'mcp-previews-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${api.origin}/v1/mcp`), {
        requestInit: { headers: bearer(account.key) },
      }),
    );
    clients.push(client);
    return client;
  };
  /** A finished generation made through the REST API (no MCP call has asked for its preview yet). */
  const finished = async (request: Record<string, unknown>) => {
    const created = await fetch(`${api.origin}/v1/generations`, {
      method: 'POST',
      headers: {
        ...bearer(account.key),
        'content-type': 'application/json',
        'idempotency-key': `${Math.random()}`,
      },
      body: JSON.stringify(request),
    });
    const { id } = (await created.json()) as { id: string };
    return waitFor(async () => {
      const read = await fetch(`${api.origin}/v1/generations/${id}`, { headers: bearer(account.key) });
      const generation = (await read.json()) as { id: string; status: string };
      return generation.status === 'succeeded' && generation.id;
    }, 30_000);
  };
  /** Previews made (decodes run) by the API process so far, whatever their outcome. */
  const decodes = async () =>
    (await scrape(metrics)).samples
      .filter((s) => s.name === 'mcp_previews_made_total')
      .reduce((sum, s) => sum + s.value, 0);
  const posterOf = (result: CallToolResult) =>
    (result.content.find((c) => c.type === 'image') as { data: string; mimeType: string } | undefined) ??
    null;

  it('20 concurrent get_generation on one finished video: at most the cap of ffmpegs, little memory, one decode; a second call decodes nothing', async () => {
    const client = await connect();
    // Warm up the process's MCP and preview paths on another video, so that the figures below are the calls'.
    const warmUp = await finished({ model: 'motion-1', prompt: 'a warm-up tide' });
    expect(
      posterOf(
        (await client.callTool({ name: 'get_generation', arguments: { id: warmUp } })) as CallToolResult,
      ),
    ).not.toBeNull();
    const id = await finished({ model: 'motion-1', prompt: 'waves on a shore' });
    const decodedBefore = await decodes();

    const burst = await measured(api.pid, () =>
      Promise.all(
        Array.from(
          { length: 20 },
          async () =>
            (await client.callTool({
              name: 'get_generation',
              arguments: { id, wait_seconds: 0 },
            })) as CallToolResult,
        ),
      ),
    );
    console.log(
      `20 concurrent get_generation on one video: API RSS +${(burst.rssGrowth / 2 ** 20).toFixed(1)} MB, at most ${burst.maxFfmpegs} ffmpeg at once`,
    );
    const posters = burst.result.map(posterOf);
    for (const poster of posters) expect(poster).toMatchObject({ mimeType: 'image/webp' });
    expect(new Set(posters.map((p) => p!.data)).size).toBe(1);
    expect((await sharp(Buffer.from(posters[0]!.data, 'base64')).metadata()).width).toBeGreaterThan(0);
    expect(burst.maxFfmpegs).toBeLessThanOrEqual(cap);
    expect(burst.rssGrowth).toBeLessThan(50 * 2 ** 20);
    expect((await decodes()) - decodedBefore).toBe(1);

    // Made once: the next call (and create_generation's, and tasks/result's) reads it, decoding nothing.
    const again = await measured(
      api.pid,
      () => client.callTool({ name: 'get_generation', arguments: { id } }) as Promise<CallToolResult>,
    );
    expect(posterOf(again.result)?.data).toBe(posters[0]!.data);
    expect(again.maxFfmpegs).toBe(0);
    expect((await decodes()) - decodedBefore).toBe(1);
  });
});
