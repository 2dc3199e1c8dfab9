import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import sharp from 'sharp';
import { renderVideo } from '../../../src/providers/simulated/video-drawing.js';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

const contentTypes: Record<ImageFormat, string> = {
  png: 'image/png',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
};

/** A small real image of exactly width × height, so a downloader can decode and measure it. */
export async function drawImage(width: number, height: number, format: ImageFormat = 'png'): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 40, g: 120, b: 200 } } })
    .toFormat(format)
    .toBuffer();
}

interface StoredFile {
  bytes: Buffer;
  contentType: string;
  expiresAt: number;
}

/**
 * The result files a fake provider serves itself, at `/files/{name}`, the way the providers' CDNs
 * do: public (no auth), and gone after they expire. An expired file answers `expiredStatus`
 * (the brief's 404 or 403), as a short-lived signed URL does.
 */
export class FileStore {
  private files = new Map<string, StoredFile>();
  /** How long new files live; a test can shorten it, or call expire(). */
  ttlMs = 60 * 60 * 1000;
  downloads = 0;

  constructor(
    private origin: () => string,
    private expiredStatus: 403 | 404 = 404,
  ) {}

  /** Draws an image and returns its public URL and what the provider says about it. */
  async addImage(width: number, height: number, format: ImageFormat = 'png') {
    const bytes = await drawImage(width, height, format);
    return { ...this.put(bytes, format === 'jpeg' ? 'jpg' : format, contentTypes[format]), width, height };
  }

  /** A real MP4 (H.264, no audio) of exactly width × height and the duration, drawn by the simulated provider's renderer. */
  async addVideo(width: number, height: number, durationSeconds: number) {
    const bytes = await renderVideo({
      prompt: 'fake provider',
      width,
      height,
      durationSeconds,
      audio: false,
      frames: [],
    });
    return { ...this.put(bytes, 'mp4', 'video/mp4'), width, height, durationSeconds };
  }

  private put(bytes: Buffer, extension: string, contentType: string) {
    const name = `${randomUUID()}.${extension}`;
    this.files.set(name, { bytes, contentType, expiresAt: Date.now() + this.ttlMs });
    return { url: `${this.origin()}/files/${name}`, name, contentType, size: bytes.length };
  }

  /** Expires one file (by URL) or every file now. */
  expire(url?: string): void {
    for (const [name, file] of this.files) {
      if (url === undefined || url.endsWith(`/files/${name}`)) file.expiresAt = 0;
    }
  }

  /** Serves GET /files/{name}; false when the path is not a file path. */
  serve(path: string, response: http.ServerResponse): boolean {
    const match = /^\/files\/([^/?]+)/.exec(path);
    if (!match) return false;
    const file = this.files.get(match[1]!);
    if (!file) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
    } else if (Date.now() >= file.expiresAt) {
      const text = this.expiredStatus === 403 ? 'Request has expired' : 'Not Found';
      response.writeHead(this.expiredStatus, { 'content-type': 'text/plain' }).end(text);
    } else {
      this.downloads++;
      response.writeHead(200, { 'content-type': file.contentType, 'content-length': file.bytes.length });
      response.end(file.bytes);
    }
    return true;
  }
}
