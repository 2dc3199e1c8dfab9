import { describe, expect, it } from 'vitest';
import { createGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

/** Operators find a generation in the Temporal UI (or `temporal workflow list`) by the id a customer quotes. */
describe('the GenerationId search attribute', () => {
  const stack = useGenerationStack();

  it("GenerationId = 'gen_…' finds the generation's workflow, whose id is a hash of the keys", async () => {
    const response = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: 'findable' },
      'find-me-1',
    );
    expect(response.statusCode).toBe(202);
    const id = String(response.headers['x-request-id']);
    const found: string[] = [];
    // Visibility is eventually consistent: give it a few seconds.
    for (let attempt = 0; attempt < 50 && found.length === 0; attempt++) {
      for await (const workflow of stack.client.workflow.list({ query: `GenerationId = '${id}'` }))
        found.push(workflow.workflowId);
      if (found.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^generation-[0-9a-f]{40}$/);
    expect(found[0]).not.toContain(id);
  });
});
