import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { imageSize } from 'image-size';
import { runFfmpeg } from './ffmpeg.js';

/**
 * The bytes are neither an image nor a video we can read: no retry can change that. Any other
 * failure to measure (ffmpeg missing, timed out or killed, a full disk, no memory) is this worker's
 * trouble, and another attempt may succeed.
 */
export class UnreadableMediaError extends Error {
  override readonly name = 'UnreadableMediaError';
}

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
 * anything else is handed to ffmpeg. Throws UnreadableMediaError when the bytes are neither an image
 * nor a video; any other error when they could not be measured.
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

/** ffmpeg's exit (a code, not a signal or our timeout) after failing to open or parse its input. */
const unreadableInput =
  /^ffmpeg exited with code \d+: [\s\S]*(Invalid data found when processing input|moov atom not found)/;

async function measureVideo(bytes: Buffer): Promise<MeasuredMedia> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'measure-'));
  try {
    const file = path.join(dir, 'media');
    await writeFile(file, bytes);
    // ffmpeg exits non-zero without an output; `-f null -` decodes nothing and describes the streams.
    const report = await runFfmpeg([
      '-hide_banner',
      '-nostdin',
      '-i',
      file,
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
    const size = /Stream .*Video: .*?, (\d{2,5})x(\d{2,5})/.exec(report);
    const duration = /Duration: (\d+):(\d+):([\d.]+)/.exec(report);
    if (!size || !duration)
      throw new UnreadableMediaError('the result is neither an image nor a video ffmpeg can read');
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
