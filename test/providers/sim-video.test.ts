import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderVideo, runFfmpeg } from '../../src/providers/sim-video.js';
import { frameColour } from '../support/media.js';

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
  let server: Server;
  let baseUrl: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sim-video-test-'));
    // Frames of another size and aspect than the video: they are fitted to it.
    const solid = (background: string) =>
      sharp({ create: { width: 320, height: 240, channels: 3, background } })
        .png()
        .toBuffer();
    const images: Record<string, Buffer> = {
      '/red.png': await solid('#ff0000'),
      '/blue.png': await solid('#0000ff'),
    };
    server = createServer((request, response) => {
      const image = images[request.url ?? ''];
      if (!image) return response.writeHead(404).end();
      response.writeHead(200, { 'content-type': 'image/png', 'content-length': image.length }).end(image);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

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

  it('first and last frame over HTTP: starts on the first image, ends on the second', async () => {
    const { file } = await render('frames', { frames: [`${baseUrl}/red.png`, `${baseUrl}/blue.png`] });
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
    const { file } = await render('first-only', { frames: [`${baseUrl}/blue.png`], audio: true });
    const info = await probe(file);
    expect(info.audio).toEqual([{ codec: 'aac' }]);
    const first = await frameColour(file, 0, dir);
    expect(first.b).toBeGreaterThan(200);
    expect(first.r).toBeLessThan(50);
  });

  it('a frame that cannot be fetched falls back to the prompt picture', async () => {
    const { file } = await render('fallback', {
      frames: [`${baseUrl}/missing.png`, 'http://127.0.0.1:1/none.png'],
    });
    const info = await probe(file);
    expect(info.video).toMatchObject([{ codec: 'h264', width: 640, height: 360 }]);
    expect(Math.abs(info.durationSeconds - 4)).toBeLessThanOrEqual(0.2);
  });

  it('rejects sizes H.264 4:2:0 cannot take, and reports ffmpeg failures with its message', async () => {
    await expect(render('odd', { width: 641 })).rejects.toThrow(/width must be a positive even integer/);
    await expect(runFfmpeg(['-hide_banner', '-i', path.join(dir, 'nothing-here.mp4')])).rejects.toThrow(
      /ffmpeg exited with code 1: .*nothing-here\.mp4: No such file or directory/s,
    );
  });
});
