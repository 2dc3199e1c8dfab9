import { createReadStream } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { StagedBatchLine } from '../../db/batch-lines.js';
import { splitLines } from './line-splitter.js';

/** Lines held in memory before they go to the staging file (and between two writes to it). */
const memoryBytes = 4 * 1024 * 1024;

/**
 * A batch's checked lines, kept while its body arrives so that no database connection is held
 * meanwhile: in memory up to 4 MiB, past that in a file of the upload's own under the system's
 * temporary folder (TMPDIR), removed by `discard`. They are then written in one short transaction
 * (createBatch), read back in order, `chunkSize` at a time. Each record is one line of the file:
 * `<line>\t<custom_id>\t<request as JSON>` (a custom_id is printable ASCII: no tab; JSON text has
 * no raw tab or newline).
 */
export class StagedLines {
  private held: StagedBatchLine[] = [];
  private heldBytes = 0;
  private file: { folder: string; path: string; handle: FileHandle | null } | null = null;

  async add(line: StagedBatchLine): Promise<void> {
    this.held.push(line);
    this.heldBytes += line.requestJson.length + line.customId.length + 16;
    if (this.heldBytes > memoryBytes) await this.spill();
  }

  /** Every line staged, in the order added, `size` at a time. */
  async *chunks(size: number): AsyncGenerator<StagedBatchLine[]> {
    const chunk: StagedBatchLine[] = [];
    if (this.file) {
      await this.file.handle?.close();
      this.file.handle = null;
      for await (const record of splitLines(createReadStream(this.file.path), Infinity)) {
        chunk.push(parseRecord(record.toString('utf8')));
        if (chunk.length >= size) yield chunk.splice(0);
      }
    }
    for (const line of this.held) {
      chunk.push(line);
      if (chunk.length >= size) yield chunk.splice(0);
    }
    if (chunk.length > 0) yield chunk;
  }

  /** Removes the staging file, if there is one. */
  async discard(): Promise<void> {
    const file = this.file;
    this.file = null;
    this.held = [];
    if (!file) return;
    await file.handle?.close().catch(() => undefined);
    await rm(file.folder, { recursive: true, force: true });
  }

  private async spill(): Promise<void> {
    if (!this.file) {
      const folder = await mkdtemp(path.join(tmpdir(), 'batch-upload-'));
      const file = path.join(folder, 'lines');
      this.file = { folder, path: file, handle: null };
      this.file.handle = await open(file, 'w');
    }
    const text = this.held.map((l) => `${l.line}\t${l.customId}\t${l.requestJson}\n`).join('');
    this.held = [];
    this.heldBytes = 0;
    await this.file.handle!.appendFile(text);
  }
}

function parseRecord(record: string): StagedBatchLine {
  const first = record.indexOf('\t');
  const second = record.indexOf('\t', first + 1);
  return {
    line: Number(record.slice(0, first)),
    customId: record.slice(first + 1, second),
    requestJson: record.slice(second + 1),
  };
}
