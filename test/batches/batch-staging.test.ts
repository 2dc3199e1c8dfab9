import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { StagedLines } from '../../src/generations/batches/batch-staging.js';
import { LineTooLong, splitLines } from '../../src/generations/batches/line-splitter.js';

function* chunksOf(...pieces: string[]): Generator<Buffer> {
  for (const piece of pieces) yield Buffer.from(piece);
}

const split = async (pieces: string[], max = 1_000) => {
  const lines: string[] = [];
  for await (const line of splitLines(chunksOf(...pieces), max)) lines.push(line.toString('utf8'));
  return lines;
};

const uploadFolders = async () => (await readdir(tmpdir())).filter((n) => n.startsWith('batch-upload-'));

describe('a batch body split into lines as it arrives', () => {
  it('splits at \\n across chunks, drops a \\r before it, keeps a last line without one, decodes a character split between chunks', async () => {
    const euro = Buffer.from('€');
    const lines: string[] = [];
    function* pieces() {
      yield Buffer.from('a\r\nb');
      yield Buffer.from('c\n\n');
      yield euro.subarray(0, 1);
      yield Buffer.concat([euro.subarray(1), Buffer.from('\nlast')]);
    }
    for await (const line of splitLines(pieces(), 100)) lines.push(line.toString('utf8'));
    expect(lines).toEqual(['a', 'bc', '', '€', 'last']);
    expect(await split(['x\n'])).toEqual(['x']);
  });

  it('throws as soon as a line passes the cap, without waiting for its end', async () => {
    let pulled = 0;
    function* endless(): Generator<Buffer> {
      yield Buffer.from('short\n');
      for (;;) {
        pulled++;
        yield Buffer.alloc(100, 0x61);
      }
    }
    const seen: string[] = [];
    const reading = (async () => {
      for await (const line of splitLines(endless(), 1_000)) seen.push(line.toString('utf8'));
    })();
    await expect(reading).rejects.toBeInstanceOf(LineTooLong);
    expect(seen).toEqual(['short']);
    expect(pulled).toBe(11);
    // Exactly at the cap is a line; one byte more is not.
    expect(await split(['a'.repeat(10), '\n'], 10)).toEqual(['a'.repeat(10)]);
    await expect(split(['a'.repeat(10), 'a\n'], 10)).rejects.toBeInstanceOf(LineTooLong);
  });
});

describe('staged batch lines', () => {
  it('past 4 MiB go to a file of their own, read back in order and chunks, the file removed by discard', async () => {
    const before = await uploadFolders();
    const staged = new StagedLines();
    const prompt = 'p'.repeat(10_000);
    for (let i = 0; i < 1_000; i++)
      await staged.add({
        line: i,
        customId: `line-${i}`,
        requestJson: JSON.stringify({ prompt: `${i} ${prompt}` }),
      });
    // 10 MB staged: a folder of this upload's own.
    expect((await uploadFolders()).length).toBe(before.length + 1);
    const read: number[] = [];
    const sizes: number[] = [];
    for await (const chunk of staged.chunks(300)) {
      sizes.push(chunk.length);
      for (const line of chunk) {
        expect(line.customId).toBe(`line-${line.line}`);
        expect(JSON.parse(line.requestJson)).toEqual({ prompt: `${line.line} ${prompt}` });
        read.push(line.line);
      }
    }
    expect(read).toEqual(Array.from({ length: 1_000 }, (_, i) => i));
    expect(sizes).toEqual([300, 300, 300, 100]);
    await staged.discard();
    expect(await uploadFolders()).toEqual(before);
  });

  it('a small batch stays in memory: no file', async () => {
    const before = await uploadFolders();
    const staged = new StagedLines();
    await staged.add({ line: 0, customId: 'a', requestJson: '{"model":"m"}' });
    expect(await uploadFolders()).toEqual(before);
    const chunks = [];
    for await (const chunk of staged.chunks(500)) chunks.push(chunk);
    expect(chunks).toEqual([[{ line: 0, customId: 'a', requestJson: '{"model":"m"}' }]]);
    await staged.discard();
  });
});
