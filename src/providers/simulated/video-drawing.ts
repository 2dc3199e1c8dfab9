import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import {
  imageDimensionsProblem,
  MAX_FETCHED_IMAGE_BYTES,
  MAX_IMAGE_PIXELS,
} from '../../catalog/image-input.js';
import { runFfmpeg } from '../../media/ffmpeg.js';
import { outboundFetch } from '../../net/outbound-fetch.js';
import { OutboundFetchError } from '../../net/outbound-fetch-error.js';
import { promptSvg, renderImage } from './image-drawing.js';

/**
 * An input frame: a URL the renderer fetches (through the outbound fetcher,
 * like any provider fetching a reference image), the bytes of one of our own
 * stored files, or one of ours that is gone.
 */
export type FrameSource = { url: string } | { bytes: Uint8Array } | { missing: true };

/** What the outbound fetcher may reach besides public addresses (see OUTBOUND_ALLOW_CIDRS). */
export interface FrameFetchPolicy {
  allowCidrs?: string[];
  /** Certificates (PEM) trusted besides the usual roots. */
  extraCa?: string[];
}

export interface VideoJob {
  prompt: string;
  /** Output size in pixels; both even (H.264 with 4:2:0 chroma needs that). */
  width: number;
  height: number;
  durationSeconds: number;
  /** An AAC tone when true; no audio stream at all when false. */
  audio: boolean;
  /** None, the first frame, or the first and the last frame. */
  frames: FrameSource[];
  /** How frame URLs are fetched; by default, public HTTPS addresses only. */
  fetch?: FrameFetchPolicy;
}

const fps = 24;
/** Longest an input frame download may take before the prompt-derived frame is used instead. */
const frameFetchTimeoutMs = 15_000;
/**
 * A real MP4 for the simulated video model: H.264 (yuv420p, faststart),
 * exactly width×height at 24 fps for the requested duration, with an AAC
 * tone when audio is asked for. Given frames, the video starts on the first
 * image and, with two, crossfades to end on the second; a single frame is
 * animated with a slow zoom. Without frames (or when a frame cannot be
 * fetched) it uses pictures derived from the prompt, crossfading between two
 * variants of it while zooming in.
 */
export async function renderVideo(job: VideoJob): Promise<Buffer> {
  const { width, height, durationSeconds } = job;
  for (const [name, value] of [
    ['width', width],
    ['height', height],
  ] as const) {
    if (!Number.isInteger(value) || value < 2 || value % 2 !== 0)
      throw new Error(`renderVideo: ${name} must be a positive even integer, got ${value}`);
  }
  if (!Number.isFinite(durationSeconds) || durationSeconds <= 0)
    throw new Error(`renderVideo: durationSeconds must be positive, got ${durationSeconds}`);

  const [firstFrame, lastFrame] = job.frames;
  const [first, last] = await Promise.all([
    firstFrame !== undefined ? loadFrame(firstFrame, width, height, job.fetch) : null,
    lastFrame !== undefined ? loadFrame(lastFrame, width, height, job.fetch) : null,
  ]);
  const start = first ?? (await renderImage(job.prompt, width, height, 'png'));
  // The picture to crossfade to; null: a single still, animated by the zoom alone.
  let end: Buffer | null;
  if (lastFrame !== undefined) end = last ?? (await promptStill(job.prompt, width, height, 1));
  else if (firstFrame !== undefined) end = null;
  else end = await promptStill(job.prompt, width, height, 1);
  // Ending on a given last frame means no zoom: the final frame is that image as it is.
  const zoom = lastFrame === undefined;

  const frameCount = Math.max(1, Math.round(durationSeconds * fps));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sim-video-'));
  try {
    const startFile = path.join(dir, 'start.png');
    const endFile = path.join(dir, 'end.png');
    const outFile = path.join(dir, 'out.mp4');
    await writeFile(startFile, start);
    if (end) await writeFile(endFile, end);

    const args = ['-hide_banner', '-nostdin', '-loglevel', 'error', '-y', '-i', startFile];
    if (end) args.push('-i', endFile);
    const filters: string[] = [];
    // Each still is decoded once and repeated in memory, timestamped at 24 fps.
    const still = (input: number) =>
      `[${input}:v]loop=loop=${frameCount - 1}:size=1:start=0,setpts=N/(${fps}*TB)`;
    let video = 'v0';
    filters.push(`${still(0)},format=yuv420p[v0]`);
    if (end) {
      // The second still fades in over the middle 70% of the video, so the ends show each image as it is.
      const fadeStart = (durationSeconds * 0.15).toFixed(3);
      const fadeLength = (durationSeconds * 0.7).toFixed(3);
      filters.push(`${still(1)},format=yuva420p,fade=t=in:st=${fadeStart}:d=${fadeLength}:alpha=1[v1]`);
      filters.push(`[v0][v1]overlay=format=yuv420[vx]`);
      video = 'vx';
    }
    if (zoom) {
      const steps = Math.max(1, frameCount - 1);
      filters.push(
        `[${video}]zoompan=z='1+0.12*on/${steps}':x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2':d=1:s=${width}x${height}:fps=${fps}[vz]`,
      );
      video = 'vz';
    }
    filters.push(`[${video}]format=yuv420p,setsar=1[vout]`);

    if (job.audio) {
      const frequency = toneFor(job.prompt);
      const fadeOut = Math.max(0, durationSeconds - 0.4).toFixed(3);
      args.push(
        '-f',
        'lavfi',
        '-i',
        `sine=frequency=${frequency}:sample_rate=44100:duration=${durationSeconds}`,
      );
      filters.push(`[${end ? 2 : 1}:a]volume=0.3,afade=t=in:d=0.2,afade=t=out:st=${fadeOut}:d=0.4[aout]`);
    }

    args.push('-filter_complex', filters.join(';'), '-map', '[vout]');
    if (job.audio) args.push('-map', '[aout]', '-c:a', 'aac', '-b:a', '96k');
    else args.push('-an');
    args.push(
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-pix_fmt',
      'yuv420p',
      '-r',
      String(fps),
      '-frames:v',
      String(frameCount),
      '-t',
      String(durationSeconds),
      '-movflags',
      '+faststart',
      outFile,
    );
    await runFfmpeg(args);
    return await readFile(outFile);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * An input frame fitted to the output size, or null when it cannot be had:
 * the fetcher refused it or could not get it, or it is not a picture we
 * decode (PNG, JPEG, WebP or GIF within the pixel limits). A crafted image
 * is refused from its header, before a pixel is decoded.
 */
async function loadFrame(
  source: FrameSource,
  width: number,
  height: number,
  policy: FrameFetchPolicy = {},
): Promise<Buffer | null> {
  let bytes: Buffer;
  if ('missing' in source) return null;
  if ('bytes' in source)
    bytes = Buffer.from(source.bytes.buffer, source.bytes.byteOffset, source.bytes.byteLength);
  else {
    try {
      ({ bytes } = await outboundFetch(source.url, {
        maxBytes: MAX_FETCHED_IMAGE_BYTES,
        timeoutMs: frameFetchTimeoutMs,
        accept: ['image/*'],
        allowCidrs: policy.allowCidrs ?? [],
        extraCa: policy.extraCa ?? [],
      }));
    } catch (error) {
      if (error instanceof OutboundFetchError) return null;
      throw error;
    }
  }
  try {
    const image = sharp(bytes, { limitInputPixels: MAX_IMAGE_PIXELS });
    const { format, width: inputWidth = 0, height: inputHeight = 0 } = await image.metadata();
    if (!decodedFormats.has(format ?? '') || imageDimensionsProblem(inputWidth, inputHeight)) return null;
    return await image
      .rotate()
      .resize(width, height, { fit: 'cover' })
      .flatten({ background: '#000000' })
      .png({ compressionLevel: 1 })
      .toBuffer();
  } catch {
    // Not an image sharp can read.
    return null;
  }
}

/** The raster formats input images may have (as data URIs too): no SVG, TIFF, HEIF or others. */
const decodedFormats = new Set(['png', 'jpeg', 'webp', 'gif']);

/** A variant of the prompt picture, its shapes moved along (promptSvg's `frame`). */
function promptStill(prompt: string, width: number, height: number, variant: number): Promise<Buffer> {
  const shift = Math.round((variant * width) / 60);
  return sharp(Buffer.from(promptSvg(prompt, width, height, shift)), { limitInputPixels: MAX_IMAGE_PIXELS })
    .png({ compressionLevel: 1 })
    .toBuffer();
}

/** A note picked by the prompt, so different prompts sound a little different. */
function toneFor(prompt: string): number {
  const notes = [196, 220, 247, 262, 294, 330];
  return notes[createHash('sha256').update(prompt).digest()[0]! % notes.length]!;
}
