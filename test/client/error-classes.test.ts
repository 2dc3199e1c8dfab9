import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { errorCodes, type ErrorCode } from '../../src/vocabulary/errors.js';
import { projectRoot } from '../../src/config/project-root.js';
import {
  ApiError,
  GenerationClientError,
  apiErrorFor,
  errorClasses,
} from '../../clients/typescript/src/index.js';

const apiCodes = Object.keys(errorCodes) as ErrorCode[];
const answer = (code: string, status: number) =>
  apiErrorFor({ status, code, message: 'm', requestId: 'gen_req', idempotencyKey: 'key-1' });
/** The class a status gets when its code is one this client does not know: the status family's. */
const familyOf = (status: number) => answer('a_code_this_client_does_not_know', status).constructor;
/** A class's ancestry by name, from itself up to ApiError. */
function lineage(Class: unknown): string[] {
  const names: string[] = [];
  for (
    let c = Class as { name: string } | null;
    c && c !== GenerationClientError;
    c = Object.getPrototypeOf(c)
  )
    names.push(c.name);
  return names;
}

describe('one error class per error code of the API (src/vocabulary/errors.ts errorCodes)', () => {
  it.each(apiCodes)('%s has a class of its own, within its status family, carrying the ids', (code) => {
    const { status } = errorCodes[code];
    const Class = (errorClasses as Record<string, typeof ApiError | undefined>)[code];
    expect(Class, `the TypeScript client has no error class for ${code}`).toBeDefined();
    const error = answer(code, status);
    expect(error.constructor).toBe(Class);
    // Existing `instanceof` checks on the family (RateLimitError, InternalServerError, …) still hold.
    expect(error).toBeInstanceOf(familyOf(status));
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status, code, requestId: 'gen_req', idempotencyKey: 'key-1' });
    expect(error.name).toBe(Class!.name);
  });

  it('no two codes share a class, and the client has no class for a code the API lacks', () => {
    expect(Object.keys(errorClasses).sort()).toEqual([...apiCodes].sort());
    expect(new Set(Object.values(errorClasses)).size).toBe(apiCodes.length);
  });

  it("an unknown code gets its status family's class, even one named like an Object property", () => {
    expect(answer('constructor', 400)).toBeInstanceOf(ApiError);
    expect(answer('constructor', 400).constructor.name).toBe('BadRequestError');
    expect(answer('toString', 502).constructor.name).toBe('InternalServerError');
    expect(answer('teapot', 418).constructor).toBe(ApiError);
  });

  it('the Python client names each class as this one does, with the same parents', async () => {
    const source = await readFile(
      path.join(projectRoot, 'clients/python/src/generation_client/errors.py'),
      'utf8',
    );
    const parents = new Map([...source.matchAll(/^class (\w+)\((\w+)\b/gm)].map((m) => [m[1]!, m[2]!]));
    const table = /^ERROR_CLASSES[^=]*= \{([^}]*)\}/m.exec(source)?.[1] ?? '';
    const python = Object.fromEntries([...table.matchAll(/"(\w+)": (\w+)/g)].map((m) => [m[1]!, m[2]!]));
    const pythonLineage = (name: string | undefined) => {
      const names: string[] = [];
      for (let c = name; c && c !== 'GenerationClientError'; c = parents.get(c)) names.push(c);
      return names;
    };
    const expected = Object.fromEntries(apiCodes.map((code) => [code, lineage(errorClasses[code])]));
    const actual = Object.fromEntries(apiCodes.map((code) => [code, pythonLineage(python[code])]));
    expect(actual).toEqual(expected);
  });

  it.each(['clients/typescript/README.md', 'clients/python/README.md'])(
    '%s names each code with its class',
    async (readme) => {
      const text = await readFile(path.join(projectRoot, readme), 'utf8');
      // `code` → `Class`, or `code` (500) → `Class` in the 5xx row.
      const missing = apiCodes
        .map((code) => [code, errorClasses[code].name] as const)
        .filter(([code, name]) => !new RegExp(`\`${code}\`( \\(\\d{3}\\))? → \`${name}\``).test(text));
      expect(missing).toEqual([]);
    },
  );
});
