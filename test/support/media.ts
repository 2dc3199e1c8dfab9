import path from 'node:path';
import sharp from 'sharp';
import { runFfmpeg } from '../../src/media/ffmpeg.js';

/** Mean red, green and blue of one decoded frame of a video (`n`: frame number), written as a PNG into `dir`. */
export async function frameColour(file: string, n: number, dir: string) {
  // A name of its own: libvips caches decoded files by path.
  const png = path.join(dir, `${path.basename(file, '.mp4')}-frame-${n}.png`);
  await runFfmpeg([
    '-hide_banner',
    '-nostdin',
    '-loglevel',
    'error',
    '-y',
    '-i',
    file,
    '-vf',
    `select=eq(n\\,${n})`,
    '-vsync',
    '0',
    '-frames:v',
    '1',
    png,
  ]);
  const { channels } = await sharp(png).stats();
  return { r: channels[0]!.mean, g: channels[1]!.mean, b: channels[2]!.mean };
}

/** A solid `width` × `height` PNG as a data URI: an inline reference image. */
export async function pngDataUri(width: number, height: number): Promise<string> {
  const png = await sharp({ create: { width, height, channels: 3, background: '#3080c0' } })
    .png()
    .toBuffer();
  return `data:image/png;base64,${png.toString('base64')}`;
}
