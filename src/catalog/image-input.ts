import { imageSize } from 'image-size';

/**
 * Reference images arrive as HTTPS URLs or, for models that accept them, as
 * `data:image/<type>;base64,<data>` URIs. Data URIs are decoded and their bytes
 * checked against the declared type here, at the edge, so nothing downstream
 * has to trust them: the picture's size is read from its header (without
 * decoding it; the API holds no image library) and held to the pixel limits.
 */

export const MAX_IMAGE_URL_LENGTH = 2048;
export const MAX_DATA_URI_BYTES = 10 * 1024 * 1024;
/**
 * Most pixels an input image may have (width × height), wherever it is
 * decoded: a few kilobytes of PNG can claim billions of pixels, and decoding
 * them would take gigabytes. 50 megapixels takes a 48 MP phone photo.
 */
export const MAX_IMAGE_PIXELS = 50_000_000;
/** Longest side an input image may have, in pixels. */
export const MAX_IMAGE_SIDE = 8192;
/** Largest image fetched from a URL, in bytes (cut off while it streams). */
export const MAX_FETCHED_IMAGE_BYTES = 20 * 1024 * 1024;

const dataUriPattern = /^data:image\/([a-z0-9.+-]+);base64,/i;
const base64Pattern = /^[A-Za-z0-9+/]*={0,2}$/;

const signatures: Record<string, (b: Buffer) => boolean> = {
  png: (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  jpeg: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  webp: (b) =>
    b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP',
  gif: (b) =>
    b.subarray(0, 6).toString('latin1') === 'GIF87a' || b.subarray(0, 6).toString('latin1') === 'GIF89a',
};

/** The type a file's first bytes show (`png`, `jpeg`, `webp` or `gif`), by the signatures data URIs are held to; null for anything else. */
export function imageTypeOf(head: Buffer): 'png' | 'jpeg' | 'webp' | 'gif' | null {
  const found = Object.entries(signatures).find(([, check]) => check(head));
  return found ? (found[0] as 'png' | 'jpeg' | 'webp' | 'gif') : null;
}

type ImageInput =
  { kind: 'url'; url: string } | { kind: 'data'; mediaType: `image/${string}`; bytes: Buffer };

type ImageInputResult = { ok: true; image: ImageInput } | { ok: false; message: string };

/** Parses one image input; `acceptsDataUris` is the model's catalog flag. */
export function parseImageInput(value: string, acceptsDataUris: boolean): ImageInputResult {
  if (value.startsWith('data:')) {
    if (!acceptsDataUris)
      return { ok: false, message: 'This model accepts HTTPS image URLs only, not data URIs.' };
    const header = dataUriPattern.exec(value);
    if (!header) return { ok: false, message: 'A data URI must look like data:image/<type>;base64,<data>.' };
    const type = header[1]!.toLowerCase() === 'jpg' ? 'jpeg' : header[1]!.toLowerCase();
    const check = signatures[type];
    if (!check)
      return { ok: false, message: `Unsupported image type image/${type}; use png, jpeg, webp or gif.` };
    const data = value.slice(header[0].length);
    if (data.length === 0 || data.length % 4 !== 0 || !base64Pattern.test(data)) {
      return { ok: false, message: 'The data URI is not valid base64.' };
    }
    const bytes = Buffer.from(data, 'base64');
    if (bytes.length > MAX_DATA_URI_BYTES) {
      return { ok: false, message: `The image is larger than ${MAX_DATA_URI_BYTES / (1024 * 1024)} MiB.` };
    }
    if (!check(bytes)) return { ok: false, message: `The data is not a ${type} image.` };
    const sizeProblem = imageHeaderProblem(bytes, type);
    if (sizeProblem) return { ok: false, message: sizeProblem };
    return { ok: true, image: { kind: 'data', mediaType: `image/${type}`, bytes } };
  }
  if (value.length > MAX_IMAGE_URL_LENGTH) {
    return { ok: false, message: `An image URL is at most ${MAX_IMAGE_URL_LENGTH} characters.` };
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return {
      ok: false,
      message: acceptsDataUris ? 'Must be an HTTPS URL or an image data URI.' : 'Must be an HTTPS URL.',
    };
  }
  if (url.protocol !== 'https:' || url.hostname === '') {
    return {
      ok: false,
      message: acceptsDataUris ? 'Must be an HTTPS URL or an image data URI.' : 'Must be an HTTPS URL.',
    };
  }
  if (url.username || url.password) return { ok: false, message: 'Image URLs must not carry credentials.' };
  return { ok: true, image: { kind: 'url', url: url.href } };
}

/** Why a picture of this size may not be decoded, or null when it is within the limits. */
export function imageDimensionsProblem(width: number, height: number): string | null {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1)
    return 'The image has no pixels.';
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE)
    return `The image is ${width}×${height} pixels; each side may be at most ${MAX_IMAGE_SIDE}.`;
  if (width * height > MAX_IMAGE_PIXELS)
    return `The image is ${width}×${height} pixels; at most ${MAX_IMAGE_PIXELS / 1_000_000} megapixels are accepted.`;
  return null;
}

/** image-size's name for each type we accept. */
const imageSizeType: Record<string, string> = { png: 'png', jpeg: 'jpg', webp: 'webp', gif: 'gif' };

/**
 * Reads the size an image declares in its header and checks it, without decoding the pixels: the
 * rule a data URI is held to, for any image's bytes (from its start; image-size needs at most 512 KiB).
 */
export function imageHeaderProblem(bytes: Buffer, type: string): string | null {
  let size: { width: number; height: number; type?: string };
  try {
    size = imageSize(bytes);
  } catch {
    return `The data is not a valid ${type} image: its size cannot be read.`;
  }
  if (size.type !== imageSizeType[type]) return `The data is not a ${type} image.`;
  return imageDimensionsProblem(size.width, size.height);
}
