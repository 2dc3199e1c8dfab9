import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFfmpeg } from '../../../src/media/ffmpeg.js';
import { renderVideo, type FrameFetchPolicy } from '../../../src/providers/simulated/video-drawing.js';
import { frameColour } from '../../support/media.js';
import {
  pngBomb,
  pngClaiming,
  selfSignedCertificate,
  startTestServer,
  type TestServer,
} from '../../support/test-servers.js';

interface Probe {
  durationSeconds: number;
  video: { codec: string; pixelFormat: string; width: number; height: number; fps: number }[];
  audio: { codec: string }[];
}

/** What ffmpeg says about a file (`ffmpeg -i file`, decoded to nowhere so it exits 0). */
async function probe(file: string): Promise<Probe> {
  const report = await runFfmpeg(['-hide_banner', '-nostdin', '-nostats', '-i', file, '-f', 'null', '-']);
  // Only the input's description: the output section lists streams too.
  const outputAt = report.indexOf('Output #0');
  const input = outputAt === -1 ? report : report.slice(0, outputAt);
  const duration = /Duration: (\d+):(\d+):(\d+(?:\.\d+)?)/.exec(input);
  if (!duration) throw new Error(`no duration in ffmpeg output:\n${report}`);
  const [, h, m, s] = duration;
  const video = [
    ...input.matchAll(/Stream #\S+: Video: (\w+)[^\n]*?, (\w+)[^,\n]*, (\d+)x(\d+)[^\n]*?, ([\d.]+) fps/g),
  ].map(([, codec, pixelFormat, width, height, fps]) => ({
    codec: codec!,
    pixelFormat: pixelFormat!,
    width: Number(width),
    height: Number(height),
    fps: Number(fps),
  }));
  const audio = [...input.matchAll(/Stream #\S+: Audio: (\w+)/g)].map(([, codec]) => ({ codec: codec! }));
  return { durationSeconds: Number(h) * 3600 + Number(m) * 60 + Number(s), video, audio };
}

describe('renderVideo (simulated motion-1)', () => {
  let dir: string;
  let server: TestServer;
  /** On 127.0.0.2, which no test allows; it serves a red frame to whoever reaches it. */
  let elsewhere: TestServer;
  let baseUrl: string;
  /** The loopback HTTPS server allowed on purpose, as an operator would allow an internal mirror. */
  let allowLoopback: FrameFetchPolicy;
  const red = { r: 255, g: 0, b: 0 };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sim-video-test-'));
    // Frames of another size and aspect than the video: they are fitted to it.
    const solid = (background: string) =>
      sharp({ create: { width: 320, height: 240, channels: 3, background } })
        .png()
        .toBuffer();
    const images: Record<string, [string, Buffer]> = {
      '/red.png': ['image/png', await solid('#ff0000')],
      '/blue.png': ['image/png', await solid('#0000ff')],
      // 256 megapixels in 31 KB: under sharp's own default limit, far over ours.
      '/bomb.png': ['image/png', pngBomb(16_000, 16_000)],
      '/claims-huge.png': ['image/png', pngClaiming(100_000, 100_000)],
      '/tall.png': ['image/png', pngBomb(10, 9000)],
      '/picture.svg': [
        'image/svg+xml',
        Buffer.from(
          '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="red"/></svg>',
        ),
      ],
      '/red-as-html': ['text/html', await solid('#ff0000')],
    };
    const certificate = await selfSignedCertificate();
    elsewhere = await startTestServer(
      (_request, response) =>
        void response.writeHead(200, { 'content-type': 'image/png' }).end(images['/red.png']![1]),
      { tls: certificate, host: '127.0.0.2' },
    );
    server = await startTestServer(
      (request, response) => {
        if (request.url === '/to-elsewhere.png')
          return response.writeHead(302, { location: `${elsewhere.origin}/red.png` }).end();
        const image = images[request.url ?? ''];
        if (!image) return response.writeHead(404).end();
        response
          .writeHead(200, { 'content-type': image[0], 'content-length': image[1].length })
          .end(image[1]);
      },
      { tls: certificate },
    );
    baseUrl = server.origin;
    allowLoopback = { allowCidrs: ['127.0.0.1/32'], extraCa: [certificate.cert] };
  });
  afterAll(async () => {
    await server?.close();
    await elsewhere?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Whether the prompt picture (not the frame) opens the video: neither black nor the given colour. */
  const opensOnPromptPicture = async (file: string, not: { r: number; g: number; b: number }) => {
    const first = await frameColour(file, 0, dir);
    const distance = Math.abs(first.r - not.r) + Math.abs(first.g - not.g) + Math.abs(first.b - not.b);
    return first.r + first.g + first.b > 60 && distance > 60;
  };

  const render = async (name: string, job: Partial<Parameters<typeof renderVideo>[0]>) => {
    const bytes = await renderVideo({
      prompt: 'a lighthouse in fog',
      width: 640,
      height: 360,
      durationSeconds: 4,
      audio: false,
      frames: [],
      ...job,
    });
    const file = path.join(dir, `${name}.mp4`);
    await writeFile(file, bytes);
    return { bytes, file };
  };

  it('text to video with audio: H.264 640×360 at 24 fps, an AAC track, 4 s, faststart', async () => {
    const { bytes, file } = await render('audio', { audio: true });
    expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
    // faststart: the index (moov) comes before the media data (mdat).
    expect(bytes.indexOf('moov')).toBeLessThan(bytes.indexOf('mdat'));
    const info = await probe(file);
    expect(info.video).toEqual([{ codec: 'h264', pixelFormat: 'yuv420p', width: 640, height: 360, fps: 24 }]);
    expect(info.audio).toEqual([{ codec: 'aac' }]);
    expect(Math.abs(info.durationSeconds - 4)).toBeLessThanOrEqual(0.2);
  });

  it('without audio: no audio stream at all', async () => {
    const { file } = await render('silent', { audio: false, width: 360, height: 640, durationSeconds: 6 });
    const info = await probe(file);
    expect(info.video).toMatchObject([{ codec: 'h264', width: 360, height: 640 }]);
    expect(info.audio).toEqual([]);
    expect(Math.abs(info.durationSeconds - 6)).toBeLessThanOrEqual(0.2);
  });

  it('text to video shows the prompt picture, and different prompts give different videos', async () => {
    const a = await render('prompt-a', { prompt: 'a lighthouse in fog' });
    const b = await render('prompt-b', { prompt: 'a red bicycle' });
    expect(a.bytes.equals(b.bytes)).toBe(false);
    const first = await frameColour(a.file, 0, dir);
    // Not a blank: the prompt's gradient and shapes, far from black or white.
    expect(first.r + first.g + first.b).toBeGreaterThan(60);
    expect(first.r + first.g + first.b).toBeLessThan(700);
  });

  it('first and last frame over HTTPS: starts on the first image, ends on the second', async () => {
    const { file } = await render('frames', {
      frames: [{ url: `${baseUrl}/red.png` }, { url: `${baseUrl}/blue.png` }],
      fetch: allowLoopback,
    });
    const info = await probe(file);
    expect(info.video).toMatchObject([{ codec: 'h264', width: 640, height: 360 }]);
    const first = await frameColour(file, 0, dir);
    const last = await frameColour(file, 4 * 24 - 1, dir);
    expect(first.r).toBeGreaterThan(200);
    expect(first.b).toBeLessThan(50);
    expect(last.b).toBeGreaterThan(200);
    expect(last.r).toBeLessThan(50);
  });

  it('a single first frame is animated from that image', async () => {
    const { file } = await render('first-only', {
      frames: [{ url: `${baseUrl}/blue.png` }],
      audio: true,
      fetch: allowLoopback,
    });
    const info = await probe(file);
    expect(info.audio).toEqual([{ codec: 'aac' }]);
    const first = await frameColour(file, 0, dir);
    expect(first.b).toBeGreaterThan(200);
    expect(first.r).toBeLessThan(50);
  });

  it('a frame that cannot be fetched falls back to the prompt picture', async () => {
    const { file } = await render('fallback', {
      frames: [{ url: `${baseUrl}/missing.png` }, { url: 'https://127.0.0.1:1/none.png' }],
      fetch: allowLoopback,
    });
    const info = await probe(file);
    expect(info.video).toMatchObject([{ codec: 'h264', width: 640, height: 360 }]);
    expect(Math.abs(info.durationSeconds - 4)).toBeLessThanOrEqual(0.2);
  });

  it('frames given as bytes (our own stored files) are used as they are, without a fetch', async () => {
    const green = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#00ff00' } })
      .png()
      .toBuffer();
    const { file } = await render('bytes', { frames: [{ bytes: green }, { missing: true }] });
    const first = await frameColour(file, 0, dir);
    expect(first.g).toBeGreaterThan(200);
    expect(first.r).toBeLessThan(50);
  });

  it('never fetches a frame from a loopback address it was not told to allow, nor through a redirect', async () => {
    const before = server.connections;
    // No allow-list: 127.0.0.1 is loopback, refused before a connection is made.
    const { file } = await render('loopback', { frames: [{ url: `${baseUrl}/red.png` }] });
    expect(server.connections).toBe(before);
    expect(await opensOnPromptPicture(file, red)).toBe(true);
    // Allowed, but redirected to an address that is not: refused at the second hop.
    const redirected = await render('redirected', {
      frames: [{ url: `${baseUrl}/to-elsewhere.png` }],
      fetch: allowLoopback,
    });
    expect(server.requests.at(-1)).toBe('/to-elsewhere.png');
    expect(elsewhere.connections).toBe(0);
    expect(await opensOnPromptPicture(redirected.file, red)).toBe(true);
    // A declared type that is not an image is refused, whatever the bytes are.
    const typed = await render('typed', {
      frames: [{ url: `${baseUrl}/red-as-html` }],
      fetch: allowLoopback,
    });
    expect(await opensOnPromptPicture(typed.file, red)).toBe(true);
  });

  it('refuses a frame over the pixel limits from its header, without decoding it', async () => {
    const black = { r: 0, g: 0, b: 0 };
    for (const name of ['bomb.png', 'claims-huge.png', 'tall.png', 'picture.svg']) {
      const started = Date.now();
      const { file } = await render(`refused-${name}`, {
        frames: [{ url: `${baseUrl}/${name}` }],
        fetch: allowLoopback,
      });
      // Decoding 256 megapixels would take seconds and a gigabyte; refusing takes milliseconds.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await opensOnPromptPicture(file, name === 'picture.svg' ? red : black), name).toBe(true);
    }
  });

  it('rejects sizes H.264 4:2:0 cannot take, and reports ffmpeg failures with its message', async () => {
    await expect(render('odd', { width: 641 })).rejects.toThrow(/width must be a positive even integer/);
    await expect(runFfmpeg(['-hide_banner', '-i', path.join(dir, 'nothing-here.mp4')])).rejects.toThrow(
      /ffmpeg exited with code 1: .*nothing-here\.mp4: No such file or directory/s,
    );
  });
});
