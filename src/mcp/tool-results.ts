import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ServiceError } from '@temporalio/client';
import { causeChain, isDependencyFailure } from '../dependencies/failures.js';
import type { GenerationRow } from '../db/generation-reads.js';
import { ApiError, type ValidationIssue } from '../vocabulary/errors.js';
import { mediaTypeOfName } from '../storage/storage.js';
import type { Previews } from './previews.js';

type Content = CallToolResult['content'][number];

/** At most this many previews in one result (a generation may have up to 4 images). */
const maxPreviews = 4;

/** What a generation's status means to an agent reading the result, in one sentence. */
function statusWords(row: GenerationRow): string {
  switch (row.status) {
    case 'queued':
      return row.provider === null
        ? `Generation ${row.id} is queued.`
        : `Generation ${row.id} is being made by ${row.provider}.`;
    case 'succeeded':
      return `Generation ${row.id} succeeded (${row.credits} credits).`;
    case 'failed':
      return row.error?.code === 'canceled'
        ? `Generation ${row.id} was canceled; its ${row.credits} credits were refunded.`
        : `Generation ${row.id} failed: ${row.error?.message ?? 'unknown error'}${row.credits_refunded ? ' Its credits were refunded.' : ''}`;
    case 'rejected':
      return `Generation ${row.id} was rejected: ${row.error?.message ?? 'unknown reason'} Nothing was charged.`;
  }
}

/**
 * A generation as a tool result: the API's Generation object as `structuredContent` (and as JSON
 * text, for clients that show only text), and for a finished one its files: each image as a preview
 * (`image`) and a `resource_link` to the full file on the result host; each video as a
 * `resource_link` and a poster frame. `notes` are sentences for the agent (what to do next).
 * Previews are made once per file and kept (see Previews); one that cannot be had now (none can be
 * made, the call's client left, the file is gone) is left out, its link kept.
 */
export async function generationResult(
  deps: {
    previews: Pick<Previews, 'of'>;
    /** The call's life: its client gone, the previews it waits for are not made for it. */
    signal: AbortSignal;
    toGeneration(row: GenerationRow): Record<string, unknown>;
  },
  row: GenerationRow,
  notes: string[] = [],
): Promise<CallToolResult> {
  const generation = deps.toGeneration(row);
  const content: Content[] = [
    { type: 'text', text: [statusWords(row), ...notes].join(' ') },
    { type: 'text', text: JSON.stringify(generation) },
  ];
  const output = row.content_expired ? null : (row.output as OutputFiles | null);
  const images = output?.images ?? [];
  const videos = output?.videos ?? [];
  const previewsOf = (files: OutputFile[], kind: 'image' | 'video') =>
    Promise.all(
      files.map((file, index) =>
        index < maxPreviews ? deps.previews.of(file.url, kind, deps.signal) : Promise.resolve(null),
      ),
    );
  const [imagePreviews, posters] = await Promise.all([
    previewsOf(images, 'image'),
    previewsOf(videos, 'video'),
  ]);
  for (const [index, image] of images.entries()) {
    const preview = imagePreviews[index];
    if (preview) content.push({ type: 'image', ...preview });
    content.push(fileLink(image.url, 'image', image));
  }
  for (const [index, video] of videos.entries()) {
    content.push(fileLink(video.url, 'video', video));
    const poster = posters[index];
    if (poster) content.push({ type: 'image', ...poster });
  }
  return {
    content,
    structuredContent: generation,
    // A generation that ended without its result is an error to the agent (its code and message are in it).
    isError: row.status === 'failed' || row.status === 'rejected',
  };
}

interface OutputFile {
  url: string;
  width: number;
  height: number;
  content_type?: string;
  duration_seconds?: number;
}
interface OutputFiles {
  images?: OutputFile[];
  videos?: OutputFile[];
}

function fileLink(url: string, kind: 'image' | 'video', file: OutputFile): Content {
  const name = new URL(url).pathname.split('/').pop() || kind;
  const size = `${file.width}×${file.height}`;
  return {
    type: 'resource_link',
    uri: url,
    name,
    mimeType: file.content_type ?? mediaTypeOfName(name),
    description:
      kind === 'image'
        ? `The full-size image (${size}).`
        : `The video (${size}, ${file.duration_seconds ?? '?'} s).`,
  };
}

/**
 * An error of the API as a tool result: `isError` with the API's code and message (a 402 names
 * the price and the balance), the issues of an invalid request, and a generation it names.
 */
export function errorResult(error: ApiError, extra: { generation?: unknown } = {}): CallToolResult {
  const body: { error: { code: string; message: string }; issues?: ValidationIssue[]; generation?: unknown } =
    { error: { code: error.code, message: error.message } };
  if (error.extra.issues) body.issues = error.extra.issues;
  const generation = extra.generation ?? error.extra.generation;
  if (generation !== undefined) body.generation = generation;
  const issues = (error.extra.issues ?? []).map((i) => `${i.field || 'request'}: ${i.message}`);
  return {
    content: [
      { type: 'text', text: [`${error.code}: ${error.message}`, ...issues].join('\n') },
      { type: 'text', text: JSON.stringify(body) },
    ],
    isError: true,
  };
}

/** Any failure of a tool as its result: ours as they are, anything else as the API's 500 or 503. */
export function asApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (isDependencyFailure(error) || [...causeChain(error)].some((e) => e instanceof ServiceError))
    return new ApiError(
      'service_unavailable',
      'The service is temporarily unavailable. Retry with the same idempotency_key.',
      { cause: error },
    );
  return new ApiError('internal_error', 'Internal error. Retry with the same idempotency_key.', {
    cause: error,
  });
}
