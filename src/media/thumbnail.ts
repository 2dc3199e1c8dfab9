import sharp from 'sharp';

// The worker makes each thumbnail once (and the API each MCP preview, src/media/preview.ts), from a
// file it never sees again: libvips' operation cache (by default up to 50 MB and 100 operations)
// would only hold memory, and one libvips thread per small image keeps each thread's buffers out of
// the process's resident memory (see bench:idle).
sharp.cache(false);
sharp.concurrency(1);

/** The most pixels a stored image may have for a thumbnail or preview to be made of it (16,384²). */
export const MAX_INPUT_PIXELS = 16384 * 16384;

/** Thumbnails for the console's gallery: WebP, at most this wide and high, made once when a result is persisted. */
export const THUMBNAIL_SIZE = 400;

/**
 * Every persisted image pays for its thumbnail in the worker. Effort 2 of libwebp's 0–6 (default 4)
 * searches less for the smallest encoding at the same quality: 7 ms less CPU for a 1K PNG's
 * thumbnail (24 → 17 ms, most of the rest is decoding the PNG and resizing) for a file about 5%
 * larger (6.3 KB instead of 6.0).
 */
const webpOptions = { quality: 78, effort: 2 };

/**
 * The name of a WebP made from a stored file, kept beside it in the same folder (so it goes when
 * the file's content expires): `out-0.png` → `out-0-thumb.webp` (`what`: thumb).
 */
export function besideName(fileName: string, what: 'thumb' | 'preview'): string {
  const dot = fileName.lastIndexOf('.');
  return `${dot > 0 ? fileName.slice(0, dot) : fileName}-${what}.webp`;
}

/** The gallery thumbnail's name beside its image: `out-0.png` → `out-0-thumb.webp`. */
export const thumbnailName = (imageName: string): string => besideName(imageName, 'thumb');

/**
 * A WebP no larger than 400×400 keeping the image's proportions (never enlarged), from the image's
 * bytes or its file. An image its
 * header measured but whose pixels do not decode (a truncated file a provider delivered, and billed)
 * gets a plain grey tile instead: a thumbnail is ours to make, so it never fails the persist of a
 * result, and the gallery never shows a broken image.
 */
export async function makeThumbnail(image: Buffer | string): Promise<Buffer> {
  try {
    return await sharp(image, { limitInputPixels: MAX_INPUT_PIXELS })
      .rotate()
      .resize(THUMBNAIL_SIZE, THUMBNAIL_SIZE, { fit: 'inside', withoutEnlargement: true })
      .webp(webpOptions)
      .toBuffer();
  } catch {
    return placeholderThumbnail();
  }
}

function placeholderThumbnail(): Promise<Buffer> {
  return sharp({
    create: { width: THUMBNAIL_SIZE, height: THUMBNAIL_SIZE, channels: 3, background: '#d9d9d9' },
  })
    .webp(webpOptions)
    .toBuffer();
}
