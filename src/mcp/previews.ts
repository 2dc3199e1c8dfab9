import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { runFfmpeg, untrustedInput } from '../media/ffmpeg.js';
import type { Storage } from '../storage/storage.js';
import { PREVIEW_LONGEST_SIDE, PREVIEW_MAX_BYTES } from './tool-definitions.js';

/** Each smaller step a preview takes when the one before was over PREVIEW_MAX_BYTES. */
const previewSides = [PREVIEW_LONGEST_SIDE, 768, 512, 384, 256];

/**
 * A preview of an image small enough for a chat client's context: WebP, its longest side at most
 * 1,024 px (never enlarged), at most 1 MB; shrunk step by step while it is larger. Null when the
 * file is not in our storage any more, or does not decode.
 */
export async function imagePreview(
  storage: Storage,
  url: string,
): Promise<{ data: string; mimeType: string } | null> {
  const key = storage.keyOf(url);
  const bytes = key && (await storage.read(key.prefix, key.name));
  if (!bytes) return null;
  return previewOf(bytes);
}

async function previewOf(bytes: Buffer): Promise<{ data: string; mimeType: string } | null> {
  try {
    for (const side of previewSides) {
      const preview = await sharp(bytes, { limitInputPixels: 16384 * 16384 })
        .rotate()
        .resize(side, side, { fit: 'inside', withoutEnlargement: true })
        .webp({ quality: 80 })
        .toBuffer();
      if (preview.length <= PREVIEW_MAX_BYTES)
        return { data: preview.toString('base64'), mimeType: 'image/webp' };
    }
    return null;
  } catch {
    return null;
  }
}

/**
 * A video's poster frame: its first frame as a JPEG preview under the same limits as an image's.
 * The stored file is copied to a temporary folder for ffmpeg (storage may be a bucket), opened
 * with only the demuxers a file someone else made may use. Null when it cannot be made.
 */
export async function posterFrame(
  storage: Storage,
  url: string,
): Promise<{ data: string; mimeType: string } | null> {
  const key = storage.keyOf(url);
  const bytes = key && (await storage.read(key.prefix, key.name));
  if (!bytes || !key) return null;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'poster-'));
  try {
    const video = path.join(dir, `video${path.extname(key.name) || '.mp4'}`);
    const frame = path.join(dir, 'frame.png');
    await writeFile(video, bytes);
    await runFfmpeg(['-hide_banner', '-nostdin', ...untrustedInput(video), '-frames:v', '1', '-y', frame]);
    const preview = await previewOf(await readFile(frame));
    return preview && { data: preview.data, mimeType: preview.mimeType };
  } catch {
    return null;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
