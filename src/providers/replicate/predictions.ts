import { mediaTypeOfName } from '../../storage/storage.js';
import { ProviderRejection, type ProviderResult } from '../provider.js';

/**
 * Replicate's predictions as we read them (what ran, what is billed), and the model path, version
 * and Cancel-After fields we write for them.
 */

/** What a prediction looks like to us (the fields we read). */
export interface Prediction {
  id?: unknown;
  status?: unknown;
  output?: unknown;
  error?: unknown;
  data_removed?: unknown;
  started_at?: unknown;
}

/** Canceled or aborted without having started: it never ran, and Replicate does not bill it. */
export const neverStarted = (p: Prediction) =>
  (p.status === 'canceled' || p.status === 'aborted') && !started(p);

/** Replicate set `started_at`: the model ran (from then on, the prediction is billed). */
export const started = (p: Prediction) => typeof p.started_at === 'string' && p.started_at !== '';

/** `owner/name` as two escaped path segments. */
export function modelPath(model: string): string {
  const [owner, name, ...rest] = model.split('/');
  if (!owner || !name || rest.length > 0)
    throw new ProviderRejection(`${model} is not a Replicate model id (owner/name)`);
  return `${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
}

/** The `version` field: `owner/name:id`, unless the catalog already wrote it whole. */
export function versionOf(model: string, version: string): string {
  return version.includes(':') ? version : `${model}:${version}`;
}

/** A Cancel-After duration (`1h2m3s`; Replicate's minimum is 5 s). */
export function duration(ms: number): string {
  let seconds = Math.max(5, Math.ceil(ms / 1000));
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  return `${hours ? `${hours}h` : ''}${minutes ? `${minutes}m` : ''}${seconds || (!hours && !minutes) ? `${seconds}s` : ''}`;
}

/** What we know of one output file before downloading it: its URL and the type its name says. */
export function resultAt(url: string): ProviderResult {
  let contentType = 'application/octet-stream';
  try {
    contentType = mediaTypeOfName(new URL(url).pathname);
  } catch {
    // Not a URL we can read: the download will say.
  }
  // Replicate does not say the size; persisting measures the bytes.
  return { url, width: 0, height: 0, contentType };
}
