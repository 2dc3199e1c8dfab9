import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { imageSize } from 'image-size';
import { runFfmpeg } from './ffmpeg.js';

/** What a stored result is, read from its bytes rather than taken from whoever produced it. */
interface MeasuredMedia {
  contentType: string;
  width: number;
  height: number;
  /** Videos only. */
  durationSeconds?: number;
  hasAudio?: boolean;
}

const imageTypes: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
};

/**
 * The true type, size and (for a video) duration of a result. Images are read from their headers;
 * anything else is handed to ffmpeg. Throws when the bytes are neither an image nor a video.
 */
export async function measureMedia(bytes: Buffer): Promise<MeasuredMedia> {
  const image = measureImage(bytes);
  if (image) return image;
  return measureVideo(bytes);
}

function measureImage(bytes: Buffer): MeasuredMedia | null {
  try {
    const { type, width, height } = imageSize(bytes);
    const contentType = type ? imageTypes[type] : undefined;
    if (contentType && width && height) return { contentType, width, height };
  } catch {
    // Not an image image-size knows: maybe a video.
  }
  return null;
}

async function measureVideo(bytes: Buffer): Promise<MeasuredMedia> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'measure-'));
  try {
    const file = path.join(dir, 'media');
    await writeFile(file, bytes);
    // ffmpeg exits non-zero without an output; `-f null -` decodes nothing and describes the streams.
    const report = await runFfmpeg(['-hide_banner', '-nostdin', '-i', file, '-t', '0', '-f', 'null', '-']);
    const size = /Stream .*Video: .*?, (\d{2,5})x(\d{2,5})/.exec(report);
    const duration = /Duration: (\d+):(\d+):([\d.]+)/.exec(report);
    if (!size || !duration) throw new Error('the result is neither an image nor a video ffmpeg can read');
    const [hours, minutes, seconds] = duration.slice(1).map(Number) as [number, number, number];
    const container = /Input #0, ([^,]+)/.exec(report)?.[1] ?? '';
    return {
      contentType: container.includes('mp4') || container.includes('mov') ? 'video/mp4' : 'video/webm',
      width: Number(size[1]),
      height: Number(size[2]),
      durationSeconds: Math.round((hours * 3600 + minutes * 60 + seconds) * 100) / 100,
      hasAudio: /Stream .*Audio: /.test(report),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
