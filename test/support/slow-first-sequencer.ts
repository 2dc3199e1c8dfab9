import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { projectRoot } from '../../src/config/project-root.js';

/**
 * Starts the test files that take longest first, so that the suite does not end on one long file
 * running alone. vitest does this from its own cache of the last run's durations, which a fresh
 * clone (CI) does not have: it then starts the largest files first, and a short file that runs for
 * minutes (the Python client's suite, say) can start last. The durations come from
 * test/file-seconds.json (a file missing from it counts as 30 s); `npm run test:durations` writes it
 * again from vitest's cache after a full run.
 */
export class SlowFirstSequencer extends BaseSequencer {
  override sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = JSON.parse(
      readFileSync(path.join(projectRoot, 'test', 'file-seconds.json'), 'utf8'),
    ) as Record<string, number>;
    const of = (spec: TestSpecification) =>
      seconds[path.relative(projectRoot, spec.moduleId).split(path.sep).join('/')] ?? 30;
    return Promise.resolve([...files].sort((a, b) => of(b) - of(a)));
  }
}
