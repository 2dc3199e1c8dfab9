import { createReadStream, createWriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3ServiceException,
  type S3Client,
} from '@aws-sdk/client-s3';
import {
  headOf,
  immutableCacheControl,
  isNoSuchKey,
  parseContentRange,
  rangeHeader,
  statusOf,
  type BucketLocation,
  type ByteRange,
  type ObjectHead,
  type ObjectRead,
} from './s3-objects.js';
import { isSafeSegment, keyOfResultUrl, mediaTypeOfName, type Storage } from './storage.js';

/** A delete that left objects behind: the prefix is not gone, and the caller must try again. */
export class StorageDeleteError extends Error {
  override readonly name = 'StorageDeleteError';
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

  /** A file's content, streamed with its length (one PutObject: up to 5 GiB, past our 512 MiB cap). */
  async putFile(prefix: string, name: string, file: string, size: number): Promise<string> {
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.location.bucket,
        Key: this.objectKey(prefix, name),
        Body: createReadStream(file),
        ContentLength: size,
        ContentType: mediaTypeOfName(name),
        CacheControl: immutableCacheControl,
      }),
    );
    return this.urlFor(prefix, name);
  }

  async size(prefix: string, name: string): Promise<number | null> {
    return (await this.head(prefix, name))?.size ?? null;
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

  async download(prefix: string, name: string, file: string, signal?: AbortSignal): Promise<boolean> {
    if (!isSafeSegment(prefix) || !isSafeSegment(name)) return false;
    let body: Readable;
    try {
      const object = await this.client.send(
        new GetObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(prefix, name) }),
        { abortSignal: signal },
      );
      body = object.Body as Readable;
    } catch (error) {
      if (isNoSuchKey(error)) return false;
      throw error;
    }
    await pipeline(body, createWriteStream(file), { signal });
    return true;
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
