import { open } from 'node:fs/promises';
import { StagedImage } from '../generations/admission/inline-images.js';
import { imageHeaderProblem, imageTypeOf, MAX_DATA_URI_BYTES } from '../catalog/image-input.js';
import type { PublicModel } from '../catalog/public-model.js';
import type { ValidationIssue } from '../vocabulary/errors.js';
import { imageFieldNames } from './playground-form.js';
import type { StagedFile, StreamedForm } from './uploads.js';

/**
 * What an uploaded image is while the body is validated: a 1×1 PNG data URI, so that the API's
 * request schema counts the images and applies its field rules as it would to data URIs. The file
 * itself is held to the rules a data URI's bytes are (its type by signature, at most 10 MiB, its
 * size in pixels from its header) by judgeUploads, and replaced by a StagedImage before admission.
 */
const STAND_IN =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAADElEQVQImWNgYGAAAAAEAAGjChXjAAAAAElFTkSuQmCC';

export interface JudgedUploads {
  /** Problems with the files, one per field at most (for the form, in words). */
  issues: ValidationIssue[];
  /** Each image field's stand-ins, for bodyFromForm. */
  standIns(name: string): string[];
  /** The body with each image's media type and SHA-256 in place of its stand-in: what is fingerprinted. */
  forFingerprint(body: Record<string, unknown>): Record<string, unknown>;
  /** The accepted input with each stand-in replaced by its staged file, for startGeneration to store. */
  withStagedImages(input: Record<string, unknown>): Record<string, unknown>;
}

/** Judges the files of a model's image fields (files sent under other names are ignored, as before). */
export async function judgeUploads(model: PublicModel, form: StreamedForm): Promise<JudgedUploads> {
  const issues: ValidationIssue[] = [];
  const accepted = new Map<string, Array<{ image: StagedImage; digest: string }>>();
  if (model.accepts_data_uris) {
    for (const name of imageFieldNames(model)) {
      const judged: Array<{ image: StagedImage; digest: string }> = [];
      for (const file of form.files(name)) {
        const verdict = await judgeFile(file);
        if (typeof verdict === 'string') {
          issues.push({ field: name, code: 'invalid_value', message: verdict });
          break;
        }
        judged.push(verdict);
      }
      if (judged.length > 0) accepted.set(name, judged);
    }
  }
  const replaced = <T>(
    body: Record<string, unknown>,
    by: (entry: { image: StagedImage; digest: string }) => T,
  ) => {
    const out = { ...body };
    for (const [name, entries] of accepted) {
      if (!(name in out)) continue;
      const values = entries.map(by);
      out[name] = Array.isArray(out[name]) ? values : values[0];
    }
    return out;
  };
  return {
    issues,
    standIns: (name) => (accepted.get(name) ?? []).map(() => STAND_IN),
    forFingerprint: (body) => replaced(body, (entry) => entry.digest),
    withStagedImages: (input) => replaced(input, (entry) => entry.image),
  };
}

/** A file accepted as an image, or why not (in words). */
async function judgeFile(file: StagedFile): Promise<{ image: StagedImage; digest: string } | string> {
  const name = file.filename || 'A file';
  if (file.size > MAX_DATA_URI_BYTES)
    return `${name} is larger than ${MAX_DATA_URI_BYTES / (1024 * 1024)} MiB.`;
  const type = imageTypeOf(file.head);
  if (!type) return `${name} is not a PNG, JPEG, WebP or GIF image.`;
  let problem = imageHeaderProblem(file.head, type);
  // Rarely, a header lies past the bytes kept while the file streamed: the whole file (at most 10 MiB) is read then.
  if (problem && file.size > file.head.length) problem = imageHeaderProblem(await readWhole(file), type);
  if (problem) return `${name}: ${problem}`;
  const mediaType = `image/${type}` as const;
  return {
    image: new StagedImage(file.path, file.size, mediaType),
    digest: `${mediaType};sha256,${file.sha256}`,
  };
}

async function readWhole(file: StagedFile): Promise<Buffer> {
  const handle = await open(file.path);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}
