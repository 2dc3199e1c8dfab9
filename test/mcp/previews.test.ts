import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Registry } from 'prom-client';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFfmpeg } from '../../src/media/ffmpeg.js';
import { Previews } from '../../src/mcp/previews.js';
import { LocalStorage, type Storage } from '../../src/storage/storage.js';
import { parseScrape } from '../support/prometheus.js';

const silent = { warn: () => undefined };

/** The ffmpeg processes this test process runs now. */
function ffmpegChildren(): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(')');
    const parent = Number(stat.slice(close + 2).split(' ')[1]);
    if (parent === process.pid && stat.slice(stat.indexOf('(') + 1, close).startsWith('ffmpeg')) count++;
  }
  return count;
}

/** LocalStorage whose downloads are counted while their preview is made (a turn: download to put). */
class CountingStorage extends LocalStorage {
  inTurn = 0;
  mostInTurn = 0;
  downloads = 0;
  override async download(prefix: string, name: string, file: string, signal?: AbortSignal) {
    this.downloads++;
    this.inTurn++;
    this.mostInTurn = Math.max(this.mostInTurn, this.inTurn);
    await new Promise((resolve) => setTimeout(resolve, 30));
    return super.download(prefix, name, file, signal);
  }
  override async put(prefix: string, name: string, bytes: Buffer) {
    if (name.endsWith('-preview.webp')) this.inTurn--;
    return super.put(prefix, name, bytes);
  }
}

describe('MCP previews, made once and kept', () => {
  let root: string;
  let video: Buffer;
  const base = 'https://results.example.com';

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'previews-test-'));
    const file = path.join(root, 'source.mp4');
    await runFfmpeg([
      '-hide_banner',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=640x360:rate=24:duration=1',
      '-pix_fmt',
      'yuv420p',
      '-y',
      file,
    ]);
    video = await readFile(file);
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const setUp = async <S extends Storage>(make: (dir: string) => S, concurrency = 2) => {
    const storage = make(await mkdtemp(path.join(root, 'store-')));
    const registry = new Registry();
    const previews = new Previews(storage, { concurrency, log: silent, registry });
    const decodes = async (outcome?: string) =>
      parseScrape(await registry.metrics())
        .samples.filter(
          (s) => s.name === 'mcp_previews_made_total' && (!outcome || s.labels.outcome === outcome),
        )
        .reduce((sum, s) => sum + s.value, 0);
    return { storage, previews, decodes };
  };
  const here = new AbortController().signal;

  it('a poster frame is made once, kept beside its video, and read back by later calls without decoding', async () => {
    const { storage, previews, decodes } = await setUp((dir) => new LocalStorage(dir, base));
    const url = await storage.put('gone1', 'output-0.mp4', video);
    const first = await previews.of(url, 'video', here);
    expect(first?.mimeType).toBe('image/webp');
    const meta = await sharp(Buffer.from(first!.data, 'base64')).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height }).toEqual({
      format: 'webp',
      width: 640,
      height: 360,
    });
    expect((await storage.read('gone1', 'output-0-preview.webp'))!.toString('base64')).toBe(first!.data);
    expect(await decodes()).toBe(1);
    expect(await previews.of(url, 'video', here)).toEqual(first);
    expect(await decodes()).toBe(1);
  });

  it('calls for one file share one decode; different files take at most the cap of turns at once', async () => {
    const { storage, previews, decodes } = await setUp((dir) => new CountingStorage(dir, base), 2);
    const urls = await Promise.all(
      Array.from({ length: 6 }, (_, i) => storage.put(`many${i}`, 'output-0.mp4', video)),
    );
    let mostFfmpegs = 0;
    const sampler = setInterval(() => (mostFfmpegs = Math.max(mostFfmpegs, ffmpegChildren())), 2);
    const results = await Promise.all(
      urls.flatMap((url) => [1, 2, 3].map(() => previews.of(url, 'video', here))),
    );
    clearInterval(sampler);
    expect(results.every((r) => r?.mimeType === 'image/webp')).toBe(true);
    expect(storage.downloads).toBe(6);
    expect(await decodes('made')).toBe(6);
    expect(storage.mostInTurn).toBe(2);
    expect(mostFfmpegs).toBeLessThanOrEqual(2);
  });

  it('work whose every caller has gone stops: ffmpeg is killed, nothing is kept, and the turn is free', async () => {
    // A download that gives ffmpeg a pipe nobody writes to: it waits on it until killed.
    class StuckStorage extends LocalStorage {
      override async download(prefix: string, name: string, file: string) {
        if (name !== 'stuck.mp4') return super.download(prefix, name, file);
        execFileSync('mkfifo', [file]);
        return true;
      }
    }
    const { storage, previews, decodes } = await setUp((dir) => new StuckStorage(dir, base), 1);
    const stuck = await storage.put('stuck1', 'stuck.mp4', video);
    const [one, two] = [new AbortController(), new AbortController()];
    const first = previews.of(stuck, 'video', one.signal);
    const second = previews.of(stuck, 'video', two.signal);
    await expect.poll(ffmpegChildren).toBe(1);
    one.abort();
    expect(await first).toBeNull();
    // Another call still waits for it: it goes on.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(ffmpegChildren()).toBe(1);
    two.abort();
    expect(await second).toBeNull();
    await expect.poll(ffmpegChildren).toBe(0);
    expect(await decodes('aborted')).toBe(1);
    expect(await storage.read('stuck1', 'stuck-preview.webp')).toBeNull();
    // Its turn is free (the cap is 1): the next file's preview is made.
    const next = await storage.put('next1', 'output-0.mp4', video);
    expect(await previews.of(next, 'video', here)).not.toBeNull();
  });

  it('a file no preview can be made of is kept as none: later calls decode nothing', async () => {
    const { storage, previews, decodes } = await setUp((dir) => new LocalStorage(dir, base));
    const url = await storage.put('bad1', 'output-0.mp4', Buffer.from('not a video at all'));
    expect(await previews.of(url, 'video', here)).toBeNull();
    expect(await decodes('unreadable')).toBe(1);
    expect((await storage.read('bad1', 'output-0-preview.webp'))?.length).toBe(0);
    expect(await previews.of(url, 'video', here)).toBeNull();
    expect(await decodes()).toBe(1);
    // Not ours, or gone: no preview, no work.
    expect(await previews.of('https://elsewhere.example/x/output-0.png', 'image', here)).toBeNull();
    expect(await previews.of(`${base}/nothing/output-0.png`, 'image', here)).toBeNull();
    expect(await decodes()).toBe(1);
  });

  it('an image: WebP of at most 1,024 px and 1 MB, from a 16-bit PNG with alpha as from any other', async () => {
    const { storage, previews } = await setUp((dir) => new LocalStorage(dir, base));
    const png = await sharp({
      create: { width: 3000, height: 2000, channels: 4, background: { r: 200, g: 40, b: 90, alpha: 0.5 } },
    })
      .png()
      .toColourspace('rgb16')
      .toBuffer();
    const url = await storage.put('img1', 'output-0.png', png);
    const preview = await previews.of(url, 'image', here);
    const bytes = Buffer.from(preview!.data, 'base64');
    expect(bytes.length).toBeLessThanOrEqual(1024 * 1024);
    const meta = await sharp(bytes).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height, alpha: meta.hasAlpha }).toEqual({
      format: 'webp',
      width: 1024,
      height: 683,
      alpha: true,
    });
    const { channels } = await sharp(bytes).stats();
    expect(channels.map((c) => Math.round(c.mean / 10))).toEqual([20, 4, 9, 13]);
  });
});
