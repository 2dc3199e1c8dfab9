import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { StorageLocation } from '../storage/open-storage.js';
import { blankIsUnset, inOrder, int, settingGroup } from './setting.js';

/** Where results and inline input images are kept, and the result host that serves them. */
export const storageSettings = settingGroup({
  title: 'Storage and the result host',
  shape: {
    STORAGE_DIR: z.string().default('.data/results'),
    STORAGE_URL: z
      .string()
      .trim()
      .optional()
      .transform((value) => value || undefined)
      .superRefine((value, ctx) => {
        const problem = value === undefined ? null : storageUrlProblem(value);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    S3_ENDPOINT: blankIsUnset(
      z.string().regex(/^https?:\/\/[^/]/, 'must be an http:// or https:// URL, such as http://minio:9000'),
    ),
    S3_REGION: blankIsUnset(z.string()),
    S3_FORCE_PATH_STYLE: inOrder(['true', 'false', '1', '0', ''])
      .default('false')
      .transform((value) => value === 'true' || value === '1'),
    RESULT_HOST: z.string().default('127.0.0.1'),
    RESULT_PORT: int(8081),
    RESULT_BASE_URL: z.string().url().optional(),
  },
  docs: {
    STORAGE_DIR: {
      readBy: ['api', 'worker', 'result-host'],
      text: 'The folder results are stored in when `STORAGE_URL` is unset.',
    },
    STORAGE_URL: {
      readBy: ['api', 'worker', 'result-host'],
      text: '`file:///absolute/folder`, or `s3://bucket[/prefix]` for any S3-compatible store. Credentials come from the AWS SDK’s default chain, never from here. See [Object storage](operating.md#object-storage-storage_url).',
      default: '(the folder `STORAGE_DIR`)',
    },
    S3_ENDPOINT: {
      readBy: ['api', 'worker', 'result-host'],
      text: 'A non-AWS store’s URL: `http://minio:9000`, `https://<account>.r2.cloudflarestorage.com`, `https://storage.googleapis.com`. Unset: AWS S3.',
    },
    S3_REGION: {
      readBy: ['api', 'worker', 'result-host'],
      text: 'The bucket’s region; unset: the SDK’s own (`AWS_REGION`, the profile). R2 takes `auto`.',
    },
    S3_FORCE_PATH_STYLE: {
      readBy: ['api', 'worker', 'result-host'],
      text: '`true`: `endpoint/bucket/key` requests (MinIO, most self-hosted stores).',
    },
    RESULT_HOST: { readBy: ['result-host'], text: 'The address the result host listens on.' },
    RESULT_PORT: { readBy: ['result-host'], text: 'The port the result host listens on.' },
    RESULT_BASE_URL: {
      readBy: ['api', 'worker', 'result-host'],
      text: 'The spec’s `{result_host}`: the public base URL of stored results (the result host, or a CDN in front of the bucket).',
      default: '`http://RESULT_HOST:RESULT_PORT`',
    },
  },
});

type StorageConfig = z.output<z.ZodObject<typeof storageSettings.shape>>;

/** A bucket name as S3 and the stores that copy it allow. */
const bucketName = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** What is wrong with a STORAGE_URL, or null. */
function storageUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be file:///absolute/folder or s3://bucket[/prefix]';
  }
  if (url.protocol === 'file:') {
    try {
      fileURLToPath(url);
      return null;
    } catch {
      return 'must be a file URL of a folder on this machine: file:///absolute/folder';
    }
  }
  if (url.protocol !== 's3:') return 'must be file:///absolute/folder or s3://bucket[/prefix]';
  if (url.username || url.password)
    return 'must not hold credentials: they come from the AWS SDK chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, roles)';
  if (!bucketName.test(url.hostname)) return `names no valid bucket (s3://bucket[/prefix])`;
  if (url.search || url.hash) return 'must be s3://bucket[/prefix], without a query or fragment';
  return null;
}

/** Where this process stores and reads files: STORAGE_URL, or the folder STORAGE_DIR. */
export function storageLocation(config: StorageConfig): StorageLocation {
  const url = config.STORAGE_URL ? new URL(config.STORAGE_URL) : null;
  if (!url) return { kind: 'folder', dir: config.STORAGE_DIR };
  if (url.protocol === 'file:') return { kind: 'folder', dir: fileURLToPath(url) };
  const keyPrefix = decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, '');
  return {
    kind: 'bucket',
    bucket: url.hostname,
    keyPrefix: keyPrefix ? `${keyPrefix}/` : '',
    ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
    ...(config.S3_REGION ? { region: config.S3_REGION } : {}),
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
  };
}
