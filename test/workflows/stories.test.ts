import { readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { generationStories, keptHistories } from './stories.js';

const dir = new URL('../fixtures/histories/', import.meta.url);
const recorded = new Set((await readdir(dir)).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)));

/** Every story has its recorded histories (replayed by replay.test.ts), and every history belongs to a story. */
describe('generation stories', () => {
  it.each(Object.entries(generationStories))('%s has its recorded histories', (_story, histories) => {
    expect(histories.filter((name) => !recorded.has(name))).toEqual([]);
  });

  it.each(Object.entries(keptHistories))('%s: its kept histories are there', (_story, histories) => {
    expect(histories.filter((name) => !recorded.has(name))).toEqual([]);
  });

  it('every recorded history belongs to a story (npm run record:histories records them), or is kept from a build before', () => {
    const named = new Set([...Object.values(generationStories), ...Object.values(keptHistories)].flat());
    expect([...recorded].filter((name) => !named.has(name))).toEqual([]);
  });
});
