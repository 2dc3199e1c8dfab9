import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalStorage } from '../../src/storage/storage.js';

describe('LocalStorage: reading our own files back', () => {
  let root: string;
  let storage: LocalStorage;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'storage-test-'));
    storage = new LocalStorage(root, 'https://results.example.com/files');
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('reads what was put, and null for what is not there', async () => {
    const url = await storage.put('iabc', 'first_frame_image.png', Buffer.from('picture'));
    expect(url).toBe('https://results.example.com/files/iabc/first_frame_image.png');
    expect(await storage.read('iabc', 'first_frame_image.png')).toEqual(Buffer.from('picture'));
    expect(await storage.read('iabc', 'other.png')).toBeNull();
    expect(await storage.read('nothing', 'here.png')).toBeNull();
    // Not a key at all: no path outside the root is ever read.
    expect(await storage.read('..', 'etc')).toBeNull();
    expect(await storage.read('iabc', '../../x')).toBeNull();
    await storage.deletePrefix('iabc');
    expect(await storage.read('iabc', 'first_frame_image.png')).toBeNull();
  });

  it('downloads a file into another (streamed), false for what is not there, and stops when told', async () => {
    await storage.put('idown', 'output-0.mp4', Buffer.from('a video'));
    const copy = path.join(root, 'copy.mp4');
    expect(await storage.download('idown', 'output-0.mp4', copy)).toBe(true);
    expect(await readFile(copy, 'utf8')).toBe('a video');
    expect(await storage.download('idown', 'other.mp4', path.join(root, 'none'))).toBe(false);
    expect(await storage.download('..', 'etc', path.join(root, 'none'))).toBe(false);
    await expect(
      storage.download('idown', 'output-0.mp4', path.join(root, 'stopped'), AbortSignal.abort()),
    ).rejects.toThrow(/abort/i);
  });

  it('knows its own URLs (a query changes nothing), and no one else’s', async () => {
    expect(storage.keyOf('https://results.example.com/files/iabc/output-0.png')).toEqual({
      prefix: 'iabc',
      name: 'output-0.png',
    });
    expect(storage.keyOf('https://RESULTS.example.com:443/files/iabc/output-0.png?x=1#y')).toEqual({
      prefix: 'iabc',
      name: 'output-0.png',
    });
    expect(storage.keyOf('https://results.example.com/files/%69abc/output-0.png')).toEqual({
      prefix: 'iabc',
      name: 'output-0.png',
    });
    // Ours, but naming no object: reads as missing rather than being fetched.
    const deep = storage.keyOf('https://results.example.com/files/a/b/c.png');
    expect(deep).not.toBeNull();
    expect(await storage.read(deep!.prefix, deep!.name)).toBeNull();
    for (const url of [
      'http://results.example.com/files/iabc/output-0.png',
      'https://results.example.com:8443/files/iabc/output-0.png',
      'https://results.example.com/other/iabc/output-0.png',
      'https://results.example.com.evil.test/files/iabc/output-0.png',
      'https://images.example/iabc/output-0.png',
      'not a url',
    ])
      expect(storage.keyOf(url), url).toBeNull();
  });
});
