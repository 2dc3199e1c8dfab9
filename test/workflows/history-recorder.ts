import { writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { afterAll, expect, inject } from 'vitest';
import { temporalCliPath } from '../../src/dev/temporal-binaries.js';
import { generationStories } from './stories.js';

const run = promisify(execFile);

/**
 * How `npm run record:histories` saves a story's runs under test/fixtures/histories (call it inside
 * describe()): `record` the last runs of a workflow id's chain, `save` one run. After the file, it
 * names the stories' histories that were not recorded.
 */
export function useHistoryRecorder() {
  const recorded = new Map<string, string>();
  afterAll(() => {
    const missing = Object.values(generationStories)
      .flat()
      .filter((name) => !recorded.has(name));
    if (missing.length) console.warn(`not recorded: ${missing.join(', ')}`);
  });

  /**
   * The last runs of a workflow id's chain (each continued as the next), once the last has ended;
   * each saved under its name. A support reset starts a chain of its own: its runs are the last.
   */
  async function record(
    client: Client,
    workflowId: string,
    names: readonly string[],
    ends: 'completed' | 'failed' = 'completed',
  ) {
    const result = client.workflow.getHandle(workflowId).result();
    if (ends === 'failed') await expect(result).rejects.toThrow();
    else await result;
    const runs: string[] = [];
    let runId: string | null | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
    while (runId) {
      runs.unshift(runId);
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
    }
    expect(runs).toHaveLength(names.length);
    for (const [i, name] of names.entries()) await save(workflowId, runs[i]!, name);
  }

  async function save(workflowId: string, runId: string, name: string) {
    // The CLI writes the standard proto3 JSON of a history, which historyFromJSON reads back.
    const { stdout } = await run(
      await temporalCliPath(),
      [
        'workflow',
        'show',
        '--workflow-id',
        workflowId,
        '--run-id',
        runId,
        '--address',
        inject('temporalAddress'),
        '--output',
        'json',
      ],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    await writeFile(`test/fixtures/histories/${name}.json`, stdout);
    recorded.set(name, runId);
  }

  return { record, save };
}
