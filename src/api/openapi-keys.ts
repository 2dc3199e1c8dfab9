import { readOnlyAllowedPaths } from './auth-plugin.js';

/*
 * The OpenAPI document's parts for a key's own rules (issue 46): GET /v1/key, and the read-only
 * key's 403 on every operation that creates, cancels or changes.
 */

type Operations = Record<string, { responses?: Record<string, unknown> }>;

/** GET /v1/key: `content` its 200's body, `errors` the answers every operation has. */
export function keyPath(content: unknown, errors: Record<string, unknown>) {
  return {
    get: {
      summary: 'The key in use: its access, models, spend limit and spend',
      description:
        'What the key (or connected app) that sends this request may do and has spent: its spend limit, what is left of it and when it resets. Read-only keys may call it.',
      responses: { '200': { description: 'The key.', content }, ...errors },
    },
  };
}

/**
 * A read-only key's 403 (`readOnly`, the key_read_only response) on every operation that creates,
 * cancels or changes (every method but GET, the quotes and the MCP endpoint excepted: the rule
 * auth-plugin.ts applies), beside the 403s the operation has already.
 */
export function addReadOnlyRefusals(paths: Record<string, Operations>, readOnly: { description: string }) {
  for (const [path, operations] of Object.entries(paths)) {
    if (readOnlyAllowedPaths.has(`/v1${path}`)) continue;
    for (const [method, operation] of Object.entries(operations)) {
      if (method === 'get' || !operation.responses) continue;
      const existing = operation.responses['403'] as { description: string } | undefined;
      operation.responses['403'] = existing
        ? { ...existing, description: `${existing.description} ${readOnly.description}` }
        : readOnly;
    }
  }
}
