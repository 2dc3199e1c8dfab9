import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FrameFetchPolicy } from '../../src/providers/simulated/video-drawing.js';
import { bearer } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { frameColour } from '../support/media.js';
import { useGenerationStack } from '../support/stack.js';
import { pngBomb, selfSignedCertificate, startTestServer, type TestServer } from '../support/test-servers.js';

/**
 * motion-1 frames given as URLs, end to end through the API and the worker: the simulated
 * provider fetches them through the outbound fetcher, whose rules an operator can widen
 * (here: 127.0.0.1 allowed, as OUTBOUND_ALLOW_CIDRS would, with the test certificate trusted).
 */
describe('video frames from URLs: what the provider fetches', () => {
  const frameFetch: FrameFetchPolicy = { allowCidrs: ['127.0.0.1/32'], extraCa: [] };
  let allowed: TestServer;
  /** On 127.0.0.2, which is not allowed: it must never see a connection. */
  let internal: TestServer;
  let scratch: string;

  // Registered before the stack's own beforeAll, so the worker starts with the certificate trusted.
  beforeAll(async () => {
    const certificate = await selfSignedCertificate();
    frameFetch.extraCa!.push(certificate.cert);
    const solid = (background: string) =>
      sharp({ create: { width: 160, height: 90, channels: 3, background } })
        .png()
        .toBuffer();
    const green = await solid('#10c040');
    const red = await solid('#ff0000');
    internal = await startTestServer(
      (_request, response) => void response.writeHead(200, { 'content-type': 'image/png' }).end(red),
      { tls: certificate, host: '127.0.0.2' },
    );
    const routes: Record<string, (response: ServerResponse) => void> = {
      '/green.png': (r) => r.writeHead(200, { 'content-type': 'image/png' }).end(green),
      '/to-internal.png': (r) => r.writeHead(302, { location: `${internal.origin}/red.png` }).end(),
    };
    allowed = await startTestServer(
      (request, response) => {
        const route = routes[request.url ?? ''];
        if (route) route(response);
        else response.writeHead(404).end();
      },
      { tls: certificate },
    );
    scratch = await mkdtemp(path.join(os.tmpdir(), 'frame-inputs-'));
  });
  const stack = useGenerationStack({ worker: { frameFetch } });
  afterAll(async () => {
    await allowed?.close();
    await internal?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;

  /** Creates a 4 s motion-1 video from a first frame, waits for it, and says what colour it opens on. */
  const videoFrom = async (name: string, firstFrame: string) => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'motion-1',
      prompt: `a quiet harbour (${name})`,
      first_frame_image: firstFrame,
    });
    expect(response.statusCode).toBe(202);
    const done = await pollGeneration(
      stack.api,
      stack.account.key,
      response.json().id as string,
      undefined,
      60_000,
    );
    expect(done).toMatchObject({ status: 'succeeded', error: null });
    const download = await fetch(done.output.videos[0].url as string);
    const file = path.join(scratch, `${name}.mp4`);
    await writeFile(file, Buffer.from(await download.arrayBuffer()));
    return frameColour(file, 0, scratch);
  };

  it('fetches a frame from an allowed HTTPS address and starts the video on it', async () => {
    const first = await videoFrom('allowed', `${allowed.origin}/green.png`);
    expect(allowed.requests).toContain('/green.png');
    expect(Math.abs(first.r - 0x10)).toBeLessThan(25);
    expect(Math.abs(first.g - 0xc0)).toBeLessThan(25);
    expect(Math.abs(first.b - 0x40)).toBeLessThan(25);
  }, 90_000);

  it('never connects to an address that is not allowed, directly or through a redirect; the video still ends', async () => {
    const isRed = (c: { r: number; g: number; b: number }) => c.r > 200 && c.g < 50 && c.b < 50;
    // Directly: 127.0.0.2 by address, and by an IPv4-mapped IPv6 literal of it.
    const port = new URL(internal.origin).port;
    expect(isRed(await videoFrom('direct', `${internal.origin}/red.png`))).toBe(false);
    expect(isRed(await videoFrom('mapped', `https://[::ffff:127.0.0.2]:${port}/red.png`))).toBe(false);
    expect(internal.connections).toBe(0);
    // Through a redirect from the allowed server.
    expect(isRed(await videoFrom('redirected', `${allowed.origin}/to-internal.png`))).toBe(false);
    expect(allowed.requests).toContain('/to-internal.png');
    expect(internal.connections).toBe(0);
  }, 180_000);

  it('refuses a decompression-bomb frame at validation: 400 naming the field, nothing charged', async () => {
    const before = await balance();
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'motion-1',
      prompt: 'a bomb',
      first_frame_image: `data:image/png;base64,${pngBomb(20_000, 20_000).toString('base64')}`,
    });
    expect(response.statusCode).toBe(400);
    expect(JSON.stringify(response.json())).toContain('20000×20000');
    const issues = (response.json().issues ?? response.json().error.issues) as {
      field: string;
      code: string;
    }[];
    expect(issues).toEqual([expect.objectContaining({ field: 'first_frame_image', code: 'invalid_image' })]);
    expect(await balance()).toBe(before);
  });
});
