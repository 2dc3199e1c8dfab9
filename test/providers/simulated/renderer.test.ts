import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { renderImage } from '../../../src/providers/simulated/image-drawing.js';
import { ChildProcessRenderer } from '../../../src/providers/simulated/renderer.js';
import { frameColour } from '../../support/media.js';
import {
  pngBomb,
  selfSignedCertificate,
  startTestServer,
  type TestServer,
} from '../../support/test-servers.js';

/** The worker's renderer: the simulated provider's drawing, in a child process of its own. */
describe('ChildProcessRenderer', () => {
  const renderer = new ChildProcessRenderer();
  const childOf = (r: ChildProcessRenderer) => (r as unknown as { child: ChildProcess | null }).child;
  let dir: string;
  let server: TestServer;
  let certificate: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sim-renderer-test-'));
    const bomb = pngBomb(16_000, 16_000);
    const cert = await selfSignedCertificate();
    certificate = cert.cert;
    server = await startTestServer(
      (_request, response) => void response.writeHead(200, { 'content-type': 'image/png' }).end(bomb),
      { tls: cert },
    );
  });
  afterAll(async () => {
    renderer.close();
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('returns real PNG and JPEG bytes of the size asked, drawn in another process', async () => {
    const png = await renderer.image('a lighthouse at night', 640, 360, 'png');
    expect(await sharp(png).metadata()).toMatchObject({ format: 'png', width: 640, height: 360 });
    const jpeg = await renderer.image('a lighthouse at night', 300, 400, 'jpeg');
    expect(await sharp(jpeg).metadata()).toMatchObject({ format: 'jpeg', width: 300, height: 400 });
  });

  it('fails a render in flight when the child dies, and starts a new child for the next one', async () => {
    const inFlight = renderer.image('interrupted', 2048, 2048, 'png');
    renderer.close();
    await expect(inFlight).rejects.toThrow(/renderer process exited/);
    const next = await renderer.image('after the restart', 64, 64, 'png');
    expect(await sharp(next).metadata()).toMatchObject({ width: 64, height: 64 });
  });

  it('passes a render error back as a failure', async () => {
    await expect(renderer.image('zero', 0, 10, 'png')).rejects.toThrow();
  });

  const video = (name: string, job: Partial<Parameters<ChildProcessRenderer['video']>[0]>) =>
    renderer
      .video({
        prompt: 'a lighthouse',
        width: 320,
        height: 180,
        durationSeconds: 1,
        audio: false,
        frames: [],
        ...job,
      })
      .then(async (bytes) => {
        const file = path.join(dir, `${name}.mp4`);
        await writeFile(file, bytes);
        return frameColour(file, 0, dir);
      });

  it('takes frames as bytes (our own stored files) across the process boundary', async () => {
    const green = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#00ff00' } })
      .png()
      .toBuffer();
    const first = await video('bytes', { frames: [{ bytes: green }] });
    expect(first.g).toBeGreaterThan(200);
    expect(first.r).toBeLessThan(50);
  });

  it('survives a decompression-bomb frame: the same child refuses it and goes on', async () => {
    await renderer.image('warm up', 16, 16, 'png');
    const pid = childOf(renderer)?.pid;
    for (const frames of [[{ url: `${server.origin}/bomb.png` }], [{ bytes: pngBomb(16_000, 16_000) }]]) {
      const first = await video('bomb', {
        frames,
        fetch: { allowCidrs: ['127.0.0.1/32'], extraCa: [certificate] },
      });
      // The prompt picture, not the bomb's black.
      expect(first.r + first.g + first.b).toBeGreaterThan(60);
    }
    expect(server.requests).toEqual(['/bomb.png']);
    expect(childOf(renderer)?.pid).toBe(pid);
  });

  it('gives the child none of the worker’s secrets', async () => {
    vi.stubEnv('DATABASE_URL', 'postgres://worker:secret@db/app');
    const fresh = new ChildProcessRenderer();
    try {
      await fresh.image('env', 16, 16, 'png');
      const environ = await readFile(`/proc/${childOf(fresh)!.pid}/environ`, 'latin1');
      const names = environ.split('\0').map((entry) => entry.slice(0, entry.indexOf('=')));
      expect(names).toContain('PATH');
      expect(names).not.toContain('DATABASE_URL');
      expect(environ).not.toContain('secret');
    } finally {
      fresh.close();
      vi.unstubAllEnvs();
    }
  });
});

describe('renderImage', () => {
  it('draws a prompt holding any character: controls, unpaired surrogates, markup, emoji, right-to-left', async () => {
    const controls = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('');
    for (const prompt of [
      `tab\u0013stop`,
      `all controls ${controls} end`,
      'not\ufffe\uffff characters',
      'half a pair \ud869 and \ude00',
      '<svg> & "quotes" \'too\' ]]>',
      '😀 🏳️‍🌈 שלום עולם مرحبا \u202eevil',
      `${'😀'.repeat(40)}`,
    ]) {
      const png = await renderImage(prompt, 64, 48, 'png');
      expect(await sharp(png).metadata(), JSON.stringify(prompt)).toMatchObject({
        format: 'png',
        width: 64,
        height: 48,
      });
    }
  });
});
