import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Client } from '../../clients/typescript/src/index.js';
import { pythonClientDir } from './python-tools.js';

/**
 * One surface for both clients (issue 36): every operation of the OpenAPI document is either
 * called by a method of each client, named here, or named as left out with the reason. A new
 * operation fails this test until both clients have it (or it is said why not). The document is
 * clients/python/openapi.json, kept equal to the live GET /v1/openapi.json by python-client.test.ts.
 */
type Coverage = { typescript: string; python: string } | { neither: string };

const operations: Record<string, Coverage> = {
  'POST /generations': { typescript: 'generations.create', python: 'generations.create' },
  'GET /generations': { typescript: 'generations.list', python: 'generations.list' },
  'POST /generations/quote': { typescript: 'generations.quote', python: 'generations.quote' },
  'GET /generations/{id}': { typescript: 'generations.get', python: 'generations.get' },
  'GET /generations/{id}/events': { typescript: 'generations.events', python: 'generations.events' },
  'POST /generations/{id}/cancel': { typescript: 'generations.cancel', python: 'generations.cancel' },
  'GET /events': { typescript: 'events', python: 'events' },
  'GET /webhooks/secret': { typescript: 'webhooks.secret', python: 'webhooks.secret' },
  'POST /webhooks/secret/rotate': { typescript: 'webhooks.rotateSecret', python: 'webhooks.rotate_secret' },
  'GET /credits': { typescript: 'credits.get', python: 'credits.get' },
  'GET /key': { typescript: 'key.get', python: 'key.get' },
  'GET /models': { typescript: 'models.list', python: 'models.list' },
  'POST /batches': { typescript: 'batches.create', python: 'batches.create' },
  'POST /batches/quote': { typescript: 'batches.quote', python: 'batches.quote' },
  'GET /batches': { typescript: 'batches.list', python: 'batches.list' },
  'GET /batches/{id}': { typescript: 'batches.get', python: 'batches.get' },
  'POST /batches/{id}/cancel': { typescript: 'batches.cancel', python: 'batches.cancel' },
  'GET /batches/{id}/results': { typescript: 'batches.results', python: 'batches.results' },
  'GET /batches/{id}/events': { typescript: 'batches.events', python: 'batches.events' },
  'GET /openapi.json': { neither: 'the document itself: both clients are checked against it instead' },
};

/** The Python classes behind `client.<resource>` (sync and async), and the file each is in. */
const pythonClasses: Record<string, { file: string; classes: string[] } | { files: Record<string, string> }> =
  {
    '': { file: '_client.py', classes: ['Client', 'AsyncClient'] },
    generations: { file: '_generations.py', classes: ['Generations', 'AsyncGenerations'] },
    webhooks: { file: '_webhooks_resource.py', classes: ['Webhooks', 'AsyncWebhooks'] },
    credits: { file: '_catalog.py', classes: ['Credits', 'AsyncCredits'] },
    key: { file: '_catalog.py', classes: ['Key', 'AsyncKey'] },
    models: { file: '_catalog.py', classes: ['Models', 'AsyncModels'] },
    batches: { files: { Batches: '_batches.py', AsyncBatches: '_batches_async.py' } },
  };

/** The methods a Python class defines (its body: from `class Name` to the next top-level line). */
function pythonMethods(source: string, className: string): string[] {
  const start = source.search(new RegExp(`^class ${className}\\b`, 'm'));
  if (start < 0) return [];
  const rest = source.slice(source.indexOf('\n', start) + 1);
  const end = rest.search(/^\S/m);
  const body = end < 0 ? rest : rest.slice(0, end);
  return [...body.matchAll(/^ {4}(?:async )?def (\w+)\(/gm)].map((m) => m[1]!);
}

describe('the OpenAPI operations each client covers', () => {
  it('every operation is a method of both clients (sync and async in Python), or is named as left out', async () => {
    const document = JSON.parse(await readFile(path.join(pythonClientDir, 'openapi.json'), 'utf8')) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const listed = Object.entries(document.paths).flatMap(([route, item]) =>
      Object.keys(item)
        .filter((method) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .map((method) => `${method.toUpperCase()} ${route}`),
    );
    expect(listed.sort()).toEqual(Object.keys(operations).sort());

    const client = new Client({ apiKey: 'sk_test_operations' }) as unknown as Record<string, unknown>;
    const missing: string[] = [];
    const table: string[] = [];
    for (const [operation, coverage] of Object.entries(operations)) {
      if ('neither' in coverage) {
        table.push(`${operation.padEnd(30)} (neither: ${coverage.neither})`);
        continue;
      }
      const tsMethod = coverage.typescript
        .split('.')
        .reduce<unknown>((object, name) => (object as Record<string, unknown> | undefined)?.[name], client);
      if (typeof tsMethod !== 'function') missing.push(`TypeScript client.${coverage.typescript}`);
      const [resource, method] = coverage.python.includes('.')
        ? (coverage.python.split('.') as [string, string])
        : ['', coverage.python];
      const where = pythonClasses[resource]!;
      const files =
        'files' in where ? where.files : Object.fromEntries(where.classes.map((c) => [c, where.file]));
      for (const [className, file] of Object.entries(files))
        if (
          !pythonMethods(
            await readFile(path.join(pythonClientDir, 'src/generation_client', file), 'utf8'),
            className,
          ).includes(method)
        )
          missing.push(`Python ${className}.${method} (client.${coverage.python})`);
      table.push(
        `${operation.padEnd(30)} client.${coverage.typescript.padEnd(22)} client.${coverage.python}`,
      );
    }
    console.log(`OpenAPI operation               TypeScript                    Python\n${table.join('\n')}`);
    expect(missing).toEqual([]);
  });
});
