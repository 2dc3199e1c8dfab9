import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runFfmpeg } from '../../../src/media/ffmpeg.js';

/** Width, height and duration (s) of a video, as ffmpeg reads them. */
export async function probeVideo(bytes: Buffer): Promise<{ width: number; height: number; seconds: number }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fake-video-'));
  try {
    const file = path.join(dir, 'video.mp4');
    await writeFile(file, bytes);
    const report = await runFfmpeg(['-hide_banner', '-i', file, '-f', 'null', '-']);
    const size = /Video: .*?, (\d+)x(\d+)/.exec(report);
    const duration = /Duration: (\d+):(\d+):([\d.]+)/.exec(report);
    if (!size || !duration) throw new Error(`ffmpeg did not describe the video: ${report.slice(-500)}`);
    const [, h, m, s] = duration.map(Number) as [number, number, number, number];
    return { width: Number(size[1]), height: Number(size[2]), seconds: h * 3600 + m * 60 + s };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
