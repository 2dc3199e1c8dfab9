import { describe, expect, it } from 'vitest';
import { ffmpegEnvironment, runFfmpeg } from '../../src/media/ffmpeg.js';

describe('ffmpeg’s environment', () => {
  it('holds none of the worker’s secrets, and ffmpeg still runs with it', async () => {
    const env = ffmpegEnvironment({
      PATH: '/usr/bin',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      DATABASE_URL: 'postgres://worker:secret@db/app',
      FAL_KEY: 'fal-secret',
      REPLICATE_API_TOKEN: 'r8_secret',
      OPENAI_API_KEY: 'sk-secret',
      AWS_SECRET_ACCESS_KEY: 'aws-secret',
    });
    expect(env).toEqual({ PATH: '/usr/bin', TMPDIR: '/tmp', LANG: 'C.UTF-8' });
    await expect(runFfmpeg(['-hide_banner', '-version'])).resolves.toBeTypeOf('string');
  });
});
