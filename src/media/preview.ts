import path from 'node:path';
import sharp, { type OutputInfo } from 'sharp';
import { runFfmpeg, untrustedInput } from './ffmpeg.js';
import { UnreadableMediaError } from './measure-media.js';
// Also libvips' settings for work done once per file (no operation cache, one thread per image).
import { MAX_INPUT_PIXELS } from './thumbnail.js';

/** A preview's longest side at most (never enlarged), and its size at most. */
export const PREVIEW_LONGEST_SIDE = 1024;
export const PREVIEW_MAX_BYTES = 1024 * 1024;

/** Each smaller step a preview takes when the one before was over PREVIEW_MAX_BYTES. */
const previewSides = [PREVIEW_LONGEST_SIDE, 768, 512, 384, 256];

/** The longest a video's poster frame may take to extract (a first frame takes well under a second). */
const posterTimeoutMs = 30_000;

/**
 * A preview of the image in `file`, small enough for a chat client's context: WebP, its longest
 * side at most 1,024 px, at most 1 MB, shrunk step by step while it is larger; null when even the
 * smallest step is. The file is decoded once, read in sequence (libvips holds a few rows of a
 * large image, never the whole), into at most 1,024² pixels that each step is encoded from.
 * Throws UnreadableMediaError when the file does not decode.
 */
export async function imagePreview(file: string): Promise<Buffer | null> {
  let pixels: { data: Buffer; info: OutputInfo };
  try {
    pixels = await sharp(file, { limitInputPixels: MAX_INPUT_PIXELS, sequentialRead: true })
      .rotate()
      .resize(PREVIEW_LONGEST_SIDE, PREVIEW_LONGEST_SIDE, { fit: 'inside', withoutEnlargement: true })
      .raw()
      .toBuffer({ resolveWithObject: true });
  } catch (error) {
    throw new UnreadableMediaError(`no preview can be made: ${(error as Error).message}`, { cause: error });
  }
  const { width, height, channels } = pixels.info;
  for (const side of previewSides) {
    const preview = await sharp(pixels.data, { raw: { width, height, channels } })
      .resize(side, side, { fit: 'inside', withoutEnlargement: true })
      .webp({ quality: 80 })
      .toBuffer();
    if (preview.length <= PREVIEW_MAX_BYTES) return preview;
  }
  return null;
}

/**
 * A video's poster frame: its first frame (scaled by ffmpeg to fit the preview's size), as such a
 * preview. `dir` is a folder of the caller's for the frame. The video is opened with only the
 * demuxers a file someone else made may use; ffmpeg is killed when `signal` aborts. Throws
 * UnreadableMediaError when ffmpeg cannot read the video (it exited with an error of its own).
 */
export async function posterFrame(video: string, dir: string, signal?: AbortSignal): Promise<Buffer | null> {
  const frame = path.join(dir, 'poster.png');
  const side = PREVIEW_LONGEST_SIDE;
  try {
    await runFfmpeg(
      [
        '-hide_banner',
        '-nostdin',
        ...untrustedInput(video),
        '-frames:v',
        '1',
        '-vf',
        `scale='min(${side},iw)':'min(${side},ih)':force_original_aspect_ratio=decrease`,
        '-y',
        frame,
      ],
      { signal, timeoutMs: posterTimeoutMs },
    );
  } catch (error) {
    if (!signal?.aborted && error instanceof Error && error.message.startsWith('ffmpeg exited with code'))
      throw new UnreadableMediaError(`no poster frame can be made: ${error.message}`, { cause: error });
    throw error;
  }
  return imagePreview(frame);
}
