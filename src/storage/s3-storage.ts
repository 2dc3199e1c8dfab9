import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { isSafeSegment, keyOfResultUrl, mediaTypeOfName, type Storage } from './storage.js';

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
type ObjectRead =
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

/** A delete that left objects behind: the prefix is not gone, and the caller must try again. */
export class StorageDeleteError extends Error {
  override readonly name = 'StorageDeleteError';
}

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

/**
 * Results and inline input images in an S3-compatible bucket, one key per file under its
 * unguessable prefix. The API, the workers and the result host then share nothing but the bucket.
 * URLs are `{baseUrl}/{prefix}/{name}`: the result host streaming from the bucket, or a CDN or the
 * bucket's public endpoint serving the same keys.
 */
export class S3Storage implements Storage {
  /** Set once the store has answered that it has no DeleteObjects. */
  private oneByOne = false;

  constructor(
    private readonly client: S3Client,
    private readonly location: BucketLocation,
    private readonly baseUrl: string,
    /** Keys per listing page, each deleted by one DeleteObjects: at most 1,000, S3's own limit for both. */
    private readonly pageSize = 1_000,
  ) {}

  async put(prefix: string, name: string, bytes: Buffer): Promise<string> {
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.location.bucket,
        Key: this.objectKey(prefix, name),
        Body: bytes,
        ContentType: mediaTypeOfName(name),
        // For a CDN or a public bucket endpoint serving the objects directly.
        CacheControl: immutableCacheControl,
      }),
    );
    return this.urlFor(prefix, name);
  }

  async read(prefix: string, name: string): Promise<Buffer | null> {
    if (!isSafeSegment(prefix) || !isSafeSegment(name)) return null;
    try {
      const object = await this.client.send(
        new GetObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(prefix, name) }),
      );
      return Buffer.from(await object.Body!.transformToByteArray());
    } catch (error) {
      if (isNoSuchKey(error)) return null;
      throw error;
    }
  }

  /**
   * Lists the prefix page by page (1,000 keys each unless told) and deletes each page in one
   * DeleteObjects (or key by key, on a store without it). Any error, including one key DeleteObjects reports it could not delete, throws:
   * the content is then not gone, and content expiry must retry rather than record it as done.
   */
  async deletePrefix(prefix: string): Promise<void> {
    if (!isSafeSegment(prefix)) throw new Error(`unsafe storage prefix ${prefix}`);
    const folder = `${this.location.keyPrefix}${prefix}/`;
    let continuationToken: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.location.bucket,
          Prefix: folder,
          MaxKeys: this.pageSize,
          ContinuationToken: continuationToken,
        }),
      );
      const keys = (page.Contents ?? []).flatMap((object) => (object.Key ? [object.Key] : []));
      if (keys.length > 0) await this.deleteKeys(prefix, keys);
      continuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (continuationToken);
  }

  /** Deletes one page of keys: one DeleteObjects, or one DeleteObject each where the store has no DeleteObjects. */
  private async deleteKeys(prefix: string, keys: string[]): Promise<void> {
    if (!this.oneByOne) {
      try {
        const deleted = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.location.bucket,
            Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true },
          }),
        );
        const failed = deleted.Errors ?? [];
        if (failed.length > 0) {
          const first = failed[0]!;
          throw new StorageDeleteError(
            `${failed.length} of ${keys.length} objects under ${prefix} could not be deleted (first: ${first.Key ?? '?'}: ${first.Code ?? 'error'} ${first.Message ?? ''})`.trim(),
          );
        }
        return;
      } catch (error) {
        if (!(
          error instanceof S3ServiceException &&
          (error.name === 'NotImplemented' || statusOf(error) === 501)
        ))
          throw error;
        // GCS's XML API, for one, has no multi-object delete.
        this.oneByOne = true;
      }
    }
    for (let i = 0; i < keys.length; i += 10)
      await Promise.all(
        keys
          .slice(i, i + 10)
          .map((Key) => this.client.send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key }))),
      );
  }

  urlFor(prefix: string, name: string): string {
    return `${this.baseUrl}/${prefix}/${name}`;
  }

  keyOf(url: string): { prefix: string; name: string } | null {
    return keyOfResultUrl(this.baseUrl, url);
  }

  /** An object's size, type and validators without its bytes (HEAD); null when there is none. */
  async head(prefix: string, name: string): Promise<ObjectHead | null> {
    if (!isSafeSegment(prefix) || !isSafeSegment(name)) return null;
    try {
      const object = await this.client.send(
        new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(prefix, name) }),
      );
      return headOf(name, object.ContentLength ?? 0, object);
    } catch (error) {
      if (statusOf(error) === 404) return null;
      throw error;
    }
  }

  /**
   * An object's bytes as a stream, whole or one byte range, for the result host. The range is
   * the store's to clamp to the object's end; one that starts past it is 'unsatisfiable'.
   */
  async open(
    prefix: string,
    name: string,
    options: { range?: ByteRange; ifNoneMatch?: string } = {},
  ): Promise<ObjectRead> {
    if (!isSafeSegment(prefix) || !isSafeSegment(name)) return { kind: 'missing' };
    const { range, ifNoneMatch } = options;
    if (range && 'suffix' in range && range.suffix === 0) return this.unsatisfiable(prefix, name);
    try {
      const object = await this.client.send(
        new GetObjectCommand({
          Bucket: this.location.bucket,
          Key: this.objectKey(prefix, name),
          ...(range ? { Range: rangeHeader(range) } : {}),
          ...(ifNoneMatch ? { IfNoneMatch: ifNoneMatch } : {}),
        }),
      );
      const length = object.ContentLength ?? 0;
      const served = object.ContentRange ? parseContentRange(object.ContentRange) : null;
      return {
        kind: 'found',
        head: headOf(name, served?.size ?? length, object),
        body: object.Body as Readable,
        length,
        ...(served ? { range: { start: served.start, end: served.end } } : {}),
      };
    } catch (error) {
      const status = statusOf(error);
      if (isNoSuchKey(error)) return { kind: 'missing' };
      if (status === 416) return this.unsatisfiable(prefix, name);
      if (status === 304) return { kind: 'not-modified', etag: ifNoneMatch! };
      throw error;
    }
  }

  /** Whether the bucket answers with these credentials (HeadBucket: needs s3:ListBucket on it). */
  async check(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.location.bucket }));
  }

  private async unsatisfiable(prefix: string, name: string): Promise<ObjectRead> {
    const head = await this.head(prefix, name);
    return head ? { kind: 'unsatisfiable', size: head.size } : { kind: 'missing' };
  }

  /** The bucket key of one file. */
  private objectKey(prefix: string, name: string): string {
    for (const segment of [prefix, name])
      if (!isSafeSegment(segment)) throw new Error(`unsafe storage key segment ${segment}`);
    return `${this.location.keyPrefix}${prefix}/${name}`;
  }
}

function headOf(name: string, size: number, object: { ETag?: string; LastModified?: Date }): ObjectHead {
  return {
    size,
    // The name decides, as it does for files on disk: a store's own guess is not trusted.
    contentType: mediaTypeOfName(name),
    ...(object.ETag ? { etag: object.ETag } : {}),
    ...(object.LastModified ? { lastModified: object.LastModified } : {}),
  };
}

function rangeHeader(range: ByteRange): string {
  if ('suffix' in range) return `bytes=-${range.suffix}`;
  return `bytes=${range.start}-${range.end ?? ''}`;
}

/** `bytes 0-9/100` → its first and last byte and the whole size. */
function parseContentRange(value: string): { start: number; end: number; size: number } | null {
  const match = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(value.trim());
  return match ? { start: Number(match[1]), end: Number(match[2]), size: Number(match[3]) } : null;
}

function statusOf(error: unknown): number | undefined {
  return error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
}

/** GetObject's "no such key" (a missing bucket is a 404 too, and must not read as a missing file). */
function isNoSuchKey(error: unknown): boolean {
  return error instanceof S3ServiceException && error.name === 'NoSuchKey';
}
