import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { imageSize } from 'image-size';
import { imageSizeFromFile } from 'image-size/fromFile';
import { runFfmpeg, untrustedInput } from './ffmpeg.js';

/**
 * The bytes are neither an image nor a video we can read: no retry can change that. Any other
 * failure to measure (ffmpeg missing, timed out or killed, a full disk, no memory) is this worker's
 * trouble, and another attempt may succeed.
 */
export class UnreadableMediaError extends Error {
  override readonly name = 'UnreadableMediaError';
}

/**
 * ffmpeg's exit (a code, not a signal or our timeout) after failing to open or parse its input, or
 * refusing its container (not one untrustedInput lets through).
 */
const unreadableInput =
  /^ffmpeg exited with code \d+: [\s\S]*(Invalid data found when processing input|moov atom not found|Format not on whitelist)/;

/** What a stored result is, read from its bytes rather than taken from whoever produced it. */
export interface MeasuredMedia {
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
  const image = imageOf(() => imageSize(bytes));
  if (image) return image;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'measure-'));
  try {
    const file = path.join(dir, 'media');
    await writeFile(file, bytes);
    return await measureVideoFile(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `measureMedia` of a file, which is never read into memory whole (a result streamed to disk). */
export async function measureMediaFile(file: string): Promise<MeasuredMedia> {
  let size: ReturnType<typeof imageSize> | undefined;
  try {
    size = await imageSizeFromFile(file);
  } catch {
    // Not an image image-size knows: maybe a video.
  }
  return imageOf(() => size!) ?? measureVideoFile(file);
}

function imageOf(measure: () => ReturnType<typeof imageSize>): MeasuredMedia | null {
  try {
    const { type, width, height } = measure();
    const contentType = type ? imageTypes[type] : undefined;
    if (contentType && width && height) return { contentType, width, height };
  } catch {
    // Not an image image-size knows: maybe a video.
  }
  return null;
}

/** Video codecs a WebM file may hold: anything else in a Matroska file is not served as WebM. */
const webmCodecs = /^(vp8|vp9|av1)\b/;

async function measureVideoFile(file: string): Promise<MeasuredMedia> {
  // ffmpeg exits non-zero without an output; `-f null -` decodes nothing and describes the streams.
  const report = await runFfmpeg([
    '-hide_banner',
    '-nostdin',
    ...untrustedInput(file),
    '-t',
    '0',
    '-f',
    'null',
    '-',
  ]).catch((error: unknown) => {
    // ffmpeg ran to its end and said it cannot read the input: the bytes are at fault.
    if (error instanceof Error && unreadableInput.test(error.message))
      throw new UnreadableMediaError(`the result is not media ffmpeg can read: ${error.message}`);
    throw error;
  });
  const stream = /Stream #0:\d+[^:]*: Video: (\S+).*?, (\d{2,5})x(\d{2,5})/.exec(report);
  const duration = /Duration: (\d+):(\d+):([\d.]+)/.exec(report);
  if (!stream || !duration)
    throw new UnreadableMediaError('the result is neither an image nor a video ffmpeg can read');
  const [hours, minutes, seconds] = duration.slice(1).map(Number) as [number, number, number];
  const container = /Input #0, ([^ ]+),? from/.exec(report)?.[1] ?? '';
  const contentType = container.startsWith('mov,mp4')
    ? 'video/mp4'
    : container.startsWith('matroska') && webmCodecs.test(stream[1]!)
      ? 'video/webm'
      : undefined;
  if (!contentType)
    throw new UnreadableMediaError(`the result is a ${container || 'video'} file, neither MP4 nor WebM`);
  return {
    contentType,
    width: Number(stream[2]),
    height: Number(stream[3]),
    durationSeconds: Math.round((hours * 3600 + minutes * 60 + seconds) * 100) / 100,
    hasAudio: /Stream .*Audio: /.test(report),
  };
}
