import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { makeThumbnail, THUMBNAIL_SIZE, thumbnailName } from '../../src/media/thumbnail.js';

describe('gallery thumbnails', () => {
  it('are WebP, at most 400 px on the long side, in the image’s proportions', async () => {
    const png = await sharp({ create: { width: 1600, height: 900, channels: 3, background: '#204080' } })
      .png()
      .toBuffer();
    const meta = await sharp(await makeThumbnail(png)).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height }).toEqual({
      format: 'webp',
      width: THUMBNAIL_SIZE,
      height: 225,
    });
    expect(thumbnailName('output-0.png')).toBe('output-0-thumb.webp');
  });

  it('of an image whose pixels do not decode are a plain tile, never an error that fails the persist', async () => {
    const png = await sharp({ create: { width: 800, height: 800, channels: 3, background: '#ff0000' } })
      .png()
      .toBuffer();
    const truncated = png.subarray(0, 60); // the header (and so its measured size) without the pixels
    const meta = await sharp(await makeThumbnail(truncated)).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height }).toEqual({
      format: 'webp',
      width: THUMBNAIL_SIZE,
      height: THUMBNAIL_SIZE,
    });
  });
});
