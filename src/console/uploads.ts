import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Multipart } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';

/**
 * A multipart form read as it streams: fields kept as text (each at most `fieldBytes`), files
 * written to a temporary folder as they arrive, hashed and counted, never held in memory. What the
 * whole form may carry is the API's: a body of `totalBytes` (BODY_LIMIT_BYTES), an image of
 * `fileBytes` (a data URI's 10 MiB). Past either, reading stops and the rest of the request is
 * dropped unread; the answer (413) closes the connection after a few seconds of that at most.
 */
export interface UploadLimits {
  totalBytes: number;
  fileBytes: number;
  files: number;
  fields: number;
  fieldBytes: number;
}

/** An uploaded file, in a temporary file of its own until the form is discarded. */
export interface StagedFile {
  filename: string;
  path: string;
  size: number;
  sha256: string;
  /** Its first bytes (up to HEAD_BYTES): enough to tell its type and, almost always, its size in pixels. */
  head: Buffer;
}

/** Kept of each file while it streams: image headers are near the start (image-size reads 512 KiB of a file). */
export const HEAD_BYTES = 512 * 1024;

/** The form is larger than the limits allow; `message` says which, in words. */
export class UploadTooLarge extends Error {
  readonly statusCode = 413;
}

const MiB = 1024 * 1024;
const inMiB = (bytes: number) => `${Math.round((bytes / MiB) * 10) / 10} MiB`;

export class StreamedForm {
  private readonly values = new Map<string, string[]>();
  private readonly staged = new Map<string, StagedFile[]>();
  private bytes = 0;
  private folder: string | null = null;
  private fileCount = 0;
  private abandoned = false;

  private constructor(
    private readonly request: FastifyRequest,
    private readonly parts: AsyncIterator<Multipart> | null,
    private readonly limits: UploadLimits,
    /** Set when the form is over the limits: nothing more of it is read. */
    private refused: string | null,
  ) {}

  /**
   * Opens the form and reads its first part only, if it is a field: a console form sends its CSRF
   * token (`_csrf`) first, and the caller checks it before anything more is read. A request that
   * declares a body over the limit is not read at all.
   */
  static async open(request: FastifyRequest, limits: UploadLimits): Promise<StreamedForm> {
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > limits.totalBytes) {
      const form = new StreamedForm(request, null, limits, tooLargeMessage(limits));
      form.abandon();
      return form;
    }
    const parts = request.parts({
      limits: {
        fileSize: limits.fileBytes,
        files: limits.files,
        fields: limits.fields,
        fieldSize: limits.fieldBytes,
        parts: limits.files + limits.fields,
      },
    });
    const form = new StreamedForm(request, parts[Symbol.asyncIterator](), limits, null);
    try {
      const first = await form.parts!.next();
      if (first.done || first.value.type !== 'field')
        form.abandon(); // no token first: refused unread
      else form.keepField(first.value);
    } catch (error) {
      form.refuseOrThrow(error);
    }
    return form;
  }

  /** Why the form is refused as too large (413), or null. */
  get refusal(): string | null {
    return this.refused;
  }

  /** A field's first value. */
  field(name: string): string | undefined {
    return this.values.get(name)?.[0];
  }

  /** A field's files, in the order sent, empty file inputs left out. */
  files(name: string): StagedFile[] {
    return this.staged.get(name) ?? [];
  }

  /** Reads the rest of the form; throws UploadTooLarge past the limits. */
  async readAll(): Promise<void> {
    if (this.refused) throw new UploadTooLarge(this.refused);
    try {
      while (await this.next());
    } catch (error) {
      this.refuseOrThrow(error);
      throw new UploadTooLarge(this.refused!);
    }
  }

  /** Deletes the temporary files, and stops reading a request that was not read to its end. */
  async discard(): Promise<void> {
    this.abandon();
    if (this.folder) await rm(this.folder, { recursive: true, force: true });
  }

  /** One part read; false at the end of the form. */
  private async next(): Promise<boolean> {
    if (!this.parts || this.abandoned) return false;
    const step = await this.parts.next();
    if (step.done) return false;
    const part = step.value;
    if (part.type === 'field') {
      this.keepField(part);
      return true;
    }
    const file = await this.stage(part);
    if (part.file.truncated) {
      throw new UploadTooLarge(
        `${part.filename || 'A file'} is larger than ${inMiB(this.limits.fileBytes)}: each reference image may be at most ${inMiB(this.limits.fileBytes)}, the whole form ${inMiB(this.limits.totalBytes)}. Nothing was charged.`,
      );
    }
    if (file) this.staged.set(part.fieldname, [...(this.staged.get(part.fieldname) ?? []), file]);
    return true;
  }

  private keepField(part: Extract<Multipart, { type: 'field' }>): void {
    const value = typeof part.value === 'string' ? part.value : String(part.value);
    if (part.valueTruncated) throw new UploadTooLarge(`The field ${part.fieldname} is too long.`);
    this.count(part.fieldname.length + value.length);
    this.values.set(part.fieldname, [...(this.values.get(part.fieldname) ?? []), value]);
  }

  /** Writes one file to the temporary folder, counting and hashing it on the way; null for an empty file input. */
  private async stage(part: Extract<Multipart, { type: 'file' }>): Promise<StagedFile | null> {
    this.folder ??= await mkdtemp(path.join(tmpdir(), 'console-upload-'));
    const target = path.join(this.folder, String(this.fileCount++));
    const hash = createHash('sha256');
    const head: Buffer[] = [];
    let size = 0;
    let headSize = 0;
    const counter = new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        try {
          this.count(chunk.length);
        } catch (error) {
          done(error as Error);
          return;
        }
        size += chunk.length;
        hash.update(chunk);
        if (headSize < HEAD_BYTES) {
          const kept = Buffer.from(chunk.subarray(0, HEAD_BYTES - headSize));
          head.push(kept);
          headSize += kept.length;
        }
        done(null, chunk);
      },
    });
    await pipeline(part.file, counter, createWriteStream(target));
    if (size === 0) return null; // a file input left empty sends a part with no bytes
    return {
      filename: part.filename,
      path: target,
      size,
      sha256: hash.digest('hex'),
      head: Buffer.concat(head),
    };
  }

  private count(bytes: number): void {
    this.bytes += bytes;
    if (this.bytes > this.limits.totalBytes) throw new UploadTooLarge(tooLargeMessage(this.limits));
  }

  /** A read that failed: over a limit, the form is refused (413, in words); anything else is thrown as it was. */
  private refuseOrThrow(error: unknown): void {
    this.abandon();
    const { code, statusCode } = error as { code?: string; statusCode?: number };
    if (error instanceof UploadTooLarge) this.refused = error.message;
    else if (code === 'FST_FILES_LIMIT')
      this.refused = `The form has more than ${this.limits.files} files. Nothing was charged.`;
    else if (code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT')
      this.refused = `The form has more than ${this.limits.fields} fields. Nothing was charged.`;
    else if (statusCode === 413) this.refused = tooLargeMessage(this.limits);
    else throw error;
  }

  /**
   * Stops parsing: the request is unhooked from the parser and what is left of it flows on
   * unread, so the connection answers at once and nothing more is held.
   */
  private abandon(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    const raw = this.request.raw;
    if (!raw.readableEnded) {
      raw.unpipe();
      raw.resume();
    }
  }
}

function tooLargeMessage(limits: UploadLimits): string {
  return `The form is larger than ${inMiB(limits.totalBytes)}, the most one request may carry (each reference image at most ${inMiB(limits.fileBytes)}). Nothing was charged.`;
}
