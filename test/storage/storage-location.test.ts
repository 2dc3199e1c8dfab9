import { describe, expect, it } from 'vitest';
import { loadConfig, storageLocation } from '../../src/config/service-config.js';

describe('STORAGE_URL and the S3_ variables', () => {
  const base = { DATABASE_URL: 'postgres://u:p@db:5432/app', TEMPORAL_ADDRESS: 'temporal:7233' };
  const locationOf = (env: Record<string, string>) => storageLocation(loadConfig({ ...base, ...env }));
  const problemOf = (env: Record<string, string>) => {
    try {
      loadConfig({ ...base, ...env });
      return null;
    } catch (error) {
      return (error as Error).message;
    }
  };

  it('is the folder STORAGE_DIR when unset or blank, as before', () => {
    expect(locationOf({})).toEqual({ kind: 'folder', dir: '.data/results' });
    expect(locationOf({ STORAGE_DIR: '/srv/results', STORAGE_URL: ' ' })).toEqual({
      kind: 'folder',
      dir: '/srv/results',
    });
  });

  it('takes blank S3_ variables as unset (docker-compose passes unset ones through as blank)', () => {
    expect(locationOf({ STORAGE_URL: '', S3_ENDPOINT: '', S3_REGION: ' ', S3_FORCE_PATH_STYLE: '' })).toEqual(
      { kind: 'folder', dir: '.data/results' },
    );
    expect(locationOf({ STORAGE_URL: 's3://bucket-name', S3_ENDPOINT: '', S3_REGION: '' })).toEqual({
      kind: 'bucket',
      bucket: 'bucket-name',
      keyPrefix: '',
      forcePathStyle: false,
    });
  });

  it('takes a folder as a file URL', () => {
    expect(locationOf({ STORAGE_URL: 'file:///srv/shared%20volume/results' })).toEqual({
      kind: 'folder',
      dir: '/srv/shared volume/results',
    });
  });

  it('takes a bucket, with or without a key prefix, and the endpoint settings', () => {
    expect(locationOf({ STORAGE_URL: 's3://generation-results' })).toEqual({
      kind: 'bucket',
      bucket: 'generation-results',
      keyPrefix: '',
      forcePathStyle: false,
    });
    expect(
      locationOf({
        STORAGE_URL: 's3://generation-results/prod/results/',
        S3_ENDPOINT: 'http://minio:9000',
        S3_REGION: 'eu-central-1',
        S3_FORCE_PATH_STYLE: 'true',
      }),
    ).toEqual({
      kind: 'bucket',
      bucket: 'generation-results',
      keyPrefix: 'prod/results/',
      endpoint: 'http://minio:9000',
      region: 'eu-central-1',
      forcePathStyle: true,
    });
  });

  it('refuses what it cannot use, naming the variable', () => {
    for (const [value, expected] of [
      ['results', /STORAGE_URL: must be file:\/\/\/absolute\/folder or s3:\/\/bucket/],
      ['https://bucket.example.com/x', /STORAGE_URL: must be file:\/\/\/absolute\/folder or s3:\/\/bucket/],
      ['s3://Not_A_Bucket/x', /STORAGE_URL: names no valid bucket/],
      ['s3://key:secret@bucket-name/x', /STORAGE_URL: must not hold credentials/],
      ['file://other-host/srv/results', /STORAGE_URL: must be a file URL of a folder on this machine/],
    ] as const)
      expect(problemOf({ STORAGE_URL: value }), value).toMatch(expected);
    expect(problemOf({ S3_FORCE_PATH_STYLE: 'yes' })).toMatch(/S3_FORCE_PATH_STYLE/);
    expect(problemOf({ S3_ENDPOINT: 'minio:9000' })).toMatch(/S3_ENDPOINT/);
  });

  it('never repeats credentials given in the URL back in its message', () => {
    expect(problemOf({ STORAGE_URL: 's3://key:secret@bucket-name/x' })).not.toContain('secret');
  });
});
