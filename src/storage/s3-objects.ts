import type { Readable } from 'node:stream';
import { S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { mediaTypeOfName } from './storage.js';

/** The S3 client, and the shapes and small readings of S3 answers that S3Storage and the result host share. */

/** What a stored object is served with; it never changes once written. */
export const immutableCacheControl = 'public, max-age=31536000, immutable';

/** Where objects live in a bucket: `{keyPrefix}{prefix}/{name}`. */
export interface BucketLocation {
  bucket: string;
  /** Empty, or a path ending in `/` (from `s3://bucket/path`). */
  keyPrefix: string;
}

/** How to reach an S3-compatible store. Credentials come from the AWS SDK's default chain, never from here. */
export interface S3Endpoint {
  /** A non-AWS store (MinIO, R2, GCS interoperability); unset: AWS S3. */
  endpoint?: string;
  /** Unset: the SDK's own (AWS_REGION, the shared config file's profile). */
  region?: string;
  /** `https://endpoint/bucket/key` instead of `https://bucket.endpoint/key` (MinIO and most self-hosted stores). */
  forcePathStyle: boolean;
}

/** A byte range of an object, as a Range header asks: from `start` (to `end`, inclusive), or the last `suffix` bytes. */
export type ByteRange = { start: number; end?: number } | { suffix: number };

/** An object's description: what the result host puts in its headers. */
export interface ObjectHead {
  /** The whole object's size in bytes. */
  size: number;
  contentType: string;
  etag?: string;
  lastModified?: Date;
}

/** What a ranged streaming read found. */
export type ObjectRead =
  | {
      kind: 'found';
      head: ObjectHead;
      body: Readable;
      length: number;
      range?: { start: number; end: number };
    }
  | { kind: 'missing' }
  /** The range starts past the object's end (its size, for the 416's Content-Range). */
  | { kind: 'unsatisfiable'; size: number }
  /** The caller's If-None-Match names this object's ETag. */
  | { kind: 'not-modified'; etag: string };

/**
 * An S3 client for any S3-compatible store. Checksums are sent only where the API requires them
 * (DeleteObjects): stores other than AWS reject or mishandle the SDK's default extra checksums.
 */
export function createS3Client(endpoint: S3Endpoint): S3Client {
  return new S3Client({
    ...(endpoint.region ? { region: endpoint.region } : {}),
    ...(endpoint.endpoint ? { endpoint: endpoint.endpoint } : {}),
    forcePathStyle: endpoint.forcePathStyle,
    // A bucket in another region than the one configured is followed, not an error.
    followRegionRedirects: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      connectionTimeout: 5_000,
      // Idle time on a socket (not the whole transfer): a large download streams for as long as it takes.
      requestTimeout: 60_000,
      // The result host streams many downloads at once; the SDK's default pool is 50 sockets.
      httpAgent: { keepAlive: true, maxSockets: 256 },
      httpsAgent: { keepAlive: true, maxSockets: 256 },
    },
  });
}

export function headOf(
  name: string,
  size: number,
  object: { ETag?: string; LastModified?: Date },
): ObjectHead {
  return {
    size,
    // The name decides, as it does for files on disk: a store's own guess is not trusted.
    contentType: mediaTypeOfName(name),
    ...(object.ETag ? { etag: object.ETag } : {}),
    ...(object.LastModified ? { lastModified: object.LastModified } : {}),
  };
}

export function rangeHeader(range: ByteRange): string {
  if ('suffix' in range) return `bytes=-${range.suffix}`;
  return `bytes=${range.start}-${range.end ?? ''}`;
}

/** `bytes 0-9/100` → its first and last byte and the whole size. */
export function parseContentRange(value: string): { start: number; end: number; size: number } | null {
  const match = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(value.trim());
  return match ? { start: Number(match[1]), end: Number(match[2]), size: Number(match[3]) } : null;
}

export function statusOf(error: unknown): number | undefined {
  return error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
}

/** GetObject's "no such key" (a missing bucket is a 404 too, and must not read as a missing file). */
export function isNoSuchKey(error: unknown): boolean {
  return error instanceof S3ServiceException && error.name === 'NoSuchKey';
}
