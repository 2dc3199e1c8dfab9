import { readdir, readFile } from 'node:fs/promises';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';

const dir = new URL('../fixtures/histories/', import.meta.url);
const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort();

/**
 * Determinism: every recorded generation history (test/fixtures/histories,
 * made by `npm run record:histories`) must replay against the current
 * workflow code, or running generations would break on deploy.
 */
describe('replaying recorded workflow histories', () => {
  it('has histories to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(5);
  });

  it.each(files)('%s replays without nondeterminism', async (file) => {
    const history = historyFromJSON(JSON.parse(await readFile(new URL(file, dir), 'utf8')));
    await Worker.runReplayHistory(
      { workflowBundle: { codePath: inject('workflowBundlePath') } },
      history,
      file,
    );
  });
});
