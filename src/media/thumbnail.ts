import sharp from 'sharp';

/** Thumbnails for the console's gallery: WebP, at most this wide and high, made once when a result is persisted. */
export const THUMBNAIL_SIZE = 400;

/** The thumbnail's name beside its image in the same folder: `out-0.png` → `out-0-thumb.webp`. */
export function thumbnailName(imageName: string): string {
  const dot = imageName.lastIndexOf('.');
  return `${dot > 0 ? imageName.slice(0, dot) : imageName}-thumb.webp`;
}

/** A WebP no larger than 400×400 keeping the image's proportions (never enlarged). */
export async function makeThumbnail(image: Buffer): Promise<Buffer> {
  return sharp(image, { limitInputPixels: 16384 * 16384 })
    .rotate()
    .resize(THUMBNAIL_SIZE, THUMBNAIL_SIZE, { fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 78 })
    .toBuffer();
}
