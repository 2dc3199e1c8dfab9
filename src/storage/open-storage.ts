import { createS3Client, type BucketLocation, type S3Endpoint } from './s3-objects.js';
import { S3Storage } from './s3-storage.js';
import { LocalStorage } from './storage.js';

/** Where stored files live: a folder (one machine, or a shared volume), or an S3-compatible bucket. */
export type StorageLocation =
  { kind: 'folder'; dir: string } | ({ kind: 'bucket' } & BucketLocation & S3Endpoint);

/** The storage at a location, publishing its files under `baseUrl` (the spec's {result_host}). */
export function openStorage(location: StorageLocation, baseUrl: string): LocalStorage | S3Storage {
  return location.kind === 'folder' ? new LocalStorage(location.dir, baseUrl) : openBucket(location, baseUrl);
}

/** A bucket's storage: what the result host streams from. */
export function openBucket(
  location: Extract<StorageLocation, { kind: 'bucket' }>,
  baseUrl: string,
): S3Storage {
  const { bucket, keyPrefix, kind: _kind, ...endpoint } = location;
  return new S3Storage(createS3Client(endpoint), { bucket, keyPrefix }, baseUrl);
}
