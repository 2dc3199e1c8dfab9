import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE, parseImageInput } from '../../src/catalog/image-input.js';
import { pngBomb, pngClaiming } from '../support/test-servers.js';

const dataUri = (type: string, bytes: Buffer) => `data:image/${type};base64,${bytes.toString('base64')}`;
const refusal = (value: string) => {
  const parsed = parseImageInput(value, true);
  return parsed.ok ? null : parsed.message;
};

/** Data URIs are held to the pixel limits from their header, without decoding a pixel. */
describe('parseImageInput: the size of an inline image', () => {
  it('takes real images of every accepted type within the limits', async () => {
    const picture = sharp({ create: { width: 640, height: 480, channels: 3, background: '#336699' } });
    for (const type of ['png', 'jpeg', 'webp', 'gif'] as const) {
      const bytes = await picture.clone().toFormat(type).toBuffer();
      expect(refusal(dataUri(type, bytes)), type).toBeNull();
    }
    // At the limits exactly.
    expect(
      refusal(dataUri('png', pngBomb(MAX_IMAGE_SIDE, Math.floor(MAX_IMAGE_PIXELS / MAX_IMAGE_SIDE)))),
    ).toBeNull();
  });

  it('refuses a decompression bomb: 400 megapixels in a few kilobytes', () => {
    const bomb = pngBomb(20_000, 20_000);
    expect(bomb.length).toBeLessThan(64 * 1024);
    expect(refusal(dataUri('png', bomb))).toBe(
      'The image is 20000×20000 pixels; each side may be at most 8192.',
    );
    expect(refusal(dataUri('png', pngBomb(8000, 8000)))).toBe(
      'The image is 8000×8000 pixels; at most 50 megapixels are accepted.',
    );
  });

  it('refuses a header that claims a huge size, or a side past the limit', () => {
    expect(refusal(dataUri('png', pngClaiming(100_000, 100_000)))).toMatch(/100000×100000 pixels/);
    expect(refusal(dataUri('png', pngClaiming(9000, 10)))).toMatch(/each side may be at most 8192/);
    expect(refusal(dataUri('png', pngClaiming(0, 10)))).toMatch(/no pixels|cannot be read/);
  });

  it('refuses data whose size cannot be read, or whose header is of another type', async () => {
    // The PNG signature and nothing else.
    expect(refusal(dataUri('png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0])))).toBe(
      'The data is not a valid png image: its size cannot be read.',
    );
    const truncatedJpeg = (await sharp(pngBomb(64, 64)).jpeg().toBuffer()).subarray(0, 20);
    expect(refusal(dataUri('jpeg', truncatedJpeg))).toMatch(/not a valid jpeg image/);
  });
});
