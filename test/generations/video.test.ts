import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFfmpeg } from '../../src/media/ffmpeg.js';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { frameColour } from '../support/media.js';

/** motion-1 end to end: the simulated provider renders a real MP4 that the result host serves. */
describe('video generations (motion-1)', () => {
  const stack = useGenerationStack();
  let scratch: string;

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), 'video-test-'));
  });
  afterAll(async () => {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  /** Polls until the video is rendered (a minute at most). */
  const finished = (id: string) => pollGeneration(stack.api, stack.account.key, id, undefined, 60_000);

  /** Downloads a result URL as a client would, and lists its streams' codecs with ffmpeg. */
  const download = async (url: string) => {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('video/mp4');
    const file = path.join(scratch, `${path.basename(path.dirname(new URL(url).pathname))}.mp4`);
    await writeFile(file, Buffer.from(await response.arrayBuffer()));
    const report = await runFfmpeg(['-hide_banner', '-nostdin', '-nostats', '-i', file, '-f', 'null', '-']);
    const input = report.slice(0, report.indexOf('Output #0'));
    return {
      video: [...input.matchAll(/Stream #\S+: Video: (\w+)[^\n]*?, (\d+)x(\d+)/g)].map(
        ([, codec, width, height]) => `${codec} ${width}x${height}`,
      ),
      audio: [...input.matchAll(/Stream #\S+: Audio: (\w+)/g)].map(([, codec]) => codec),
      file,
    };
  };
  it('first-frame animation with audio: 28 credits, a 4 s 1280×720 MP4 with H.264 and AAC', async () => {
    const frame = await sharp({ create: { width: 64, height: 36, channels: 3, background: '#208040' } })
      .png()
      .toBuffer();
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'motion-1',
      prompt: 'waves at dusk',
      duration: 4,
      generate_audio: true,
      first_frame_image: `data:image/png;base64,${frame.toString('base64')}`,
    });
    expect(response.statusCode).toBe(202);
    expect(response.json()).toMatchObject({ status: 'queued', credits: 28 });

    const done = await finished(response.json().id as string);
    expect(done).toMatchObject({ status: 'succeeded', credits: 28, error: null });
    expect(done.output.videos).toHaveLength(1);
    const video = done.output.videos[0];
    expect(video).toMatchObject({
      width: 1280,
      height: 720,
      duration_seconds: 4,
      has_audio: true,
      content_type: 'video/mp4',
    });
    expect(video.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/.+\.mp4$/);
    const { file, ...streams } = await download(video.url as string);
    expect(streams).toEqual({ video: ['h264 1280x720'], audio: ['aac'] });
    // It starts on the given frame (#208040), fetched by the provider from our result host.
    const first = await frameColour(file, 0, scratch);
    expect(Math.abs(first.r - 0x20)).toBeLessThan(20);
    expect(Math.abs(first.g - 0x80)).toBeLessThan(20);
    expect(Math.abs(first.b - 0x40)).toBeLessThan(20);
  }, 90_000);

  it('text to video at 9:16 without audio: 720×1280, no audio stream', async () => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'motion-1',
      prompt: 'a tall lighthouse',
      aspect_ratio: '9:16',
    });
    expect(response.statusCode).toBe(202);
    expect(response.json()).toMatchObject({ credits: 20 });

    const done = await finished(response.json().id as string);
    expect(done.status).toBe('succeeded');
    const video = done.output.videos[0];
    expect(video).toMatchObject({
      width: 720,
      height: 1280,
      duration_seconds: 4,
      has_audio: false,
      content_type: 'video/mp4',
    });
    expect(await download(video.url as string)).toMatchObject({ video: ['h264 720x1280'], audio: [] });
  }, 90_000);
});
