import Ajv2019 from 'ajv/dist/2019.js';
import { describe, expect, it } from 'vitest';
import { checkIdempotencyKey } from '../../src/generations/generation-request.js';
import {
  idempotencyKeyHeaderSchema,
  idempotencyKeyMessage,
  idempotencyKeyPattern,
  idempotencyKeySchema,
} from '../../src/generations/idempotency-key.js';
import {
  defaultPageSize,
  listGenerationsQuerySchema,
  maxPageSize,
} from '../../src/generations/list-query.js';
import { listBatchesQuerySchema } from '../../src/api/batch-schemas.js';
import { queryParameters } from '../../src/api/openapi-parameters.js';
import { routeSchemas } from '../../src/api/route-schemas.js';
import { toJsonSchema } from '../../src/json-schema.js';

/**
 * Each rule of the front door is written once (issue 48 §1) and every door that holds it imports
 * it: here, the doors' own checks against the one rule, over values on both sides of each edge.
 */
describe('the front door rules, each from one source', () => {
  const ajv = new Ajv2019.default({ strict: false, unicodeRegExp: true });

  it('Idempotency-Key: the header check, the list filter and both published forms keep the one rule', () => {
    const keys = [
      '',
      'a',
      '!~',
      'x'.repeat(128),
      'x'.repeat(129),
      'a b',
      'tab\tkey',
      'é',
      'del\u007f',
      'k-1',
    ];
    const published = new RegExp(toJsonSchema(idempotencyKeySchema).pattern as string);
    for (const key of keys) {
      const rule = idempotencyKeyPattern.test(key);
      expect(
        {
          key,
          header: checkIdempotencyKey(key).ok,
          listFilter: listGenerationsQuerySchema.shape.idempotency_key.safeParse(key).success,
          openApiHeader: ajv.validate(idempotencyKeyHeaderSchema, key),
          publishedPattern: published.test(key),
        },
        key,
      ).toEqual({ key, header: rule, listFilter: rule, openApiHeader: rule, publishedPattern: rule });
    }
    expect(['k-1', '!~', 'x'.repeat(128)].every((key) => idempotencyKeyPattern.test(key))).toBe(true);
    // One message, whichever door refuses.
    const refused = checkIdempotencyKey('a b');
    expect(refused.ok ? null : refused.issue.message).toBe(idempotencyKeyMessage);
    expect(listGenerationsQuerySchema.shape.idempotency_key.safeParse('a b').error?.issues[0]?.message).toBe(
      idempotencyKeyMessage,
    );
  });

  it('page size: every list query reads `limit` as one rule (1 to maxPageSize, one message) and publishes it alike', () => {
    const queries = {
      generations: listGenerationsQuerySchema,
      batches: listBatchesQuerySchema,
      accountEvents: routeSchemas.listAccountEvents.querystring,
    };
    const refused = ['0', String(maxPageSize + 1), '1.5', 'x', ''];
    const answers = Object.entries(queries).map(([name, query]) => {
      const limit = query.shape.limit;
      const published = queryParameters(query).find((p) => p.name === 'limit')!;
      return {
        name,
        accepted: [limit.parse('1'), limit.parse(String(maxPageSize)), limit.parse(undefined)],
        refused: refused.map((value) => limit.safeParse(value).error?.issues.map((i) => i.message)),
        published: published.schema,
      };
    });
    for (const answer of answers)
      expect({ ...answer, name: 'generations' }, answer.name).toEqual({
        ...answers[0],
        accepted: [1, maxPageSize, undefined],
        published: { type: 'integer', minimum: 1, maximum: maxPageSize },
      });
    expect(answers[0]!.refused[3]).toEqual([`Must be a whole number from 1 to ${maxPageSize}.`]);
    expect(queryParameters(listBatchesQuerySchema)[0]!.description).toBe(
      `Page size, 1 to ${maxPageSize}; ${defaultPageSize} when absent.`,
    );
  });
});
