import { z } from 'zod';

/**
 * zod's own messages, in the words the service has always given them. zod 4 rewrote its default
 * texts ("Too small: expected number to be >=1"); operators' scripts and clients' logs know the
 * zod 3 ones ("Number must be greater than or equal to 1"), and a library upgrade is no reason to
 * change what an API answers or a bad setting says. Every parse whose messages reach a person
 * passes this as its error map: `schema.safeParse(value, parseOptions)`. A message a schema sets
 * itself (`.min(1, 'Must not be empty.')`) still wins.
 */
export const parseOptions = { error: zod3Message } as const;

// And for every other parse in a process that loads this module (the schema modules import it):
// one set of words, whoever parses.
z.config({ customError: zod3Message });

/** The type zod 3 named a value by in "Expected string, received number". */
export function receivedType(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'string':
      return 'string';
    case 'number':
      return Number.isNaN(value) ? 'nan' : 'number';
    case 'boolean':
      return 'boolean';
    case 'function':
      return 'function';
    case 'bigint':
      return 'bigint';
    case 'symbol':
      return 'symbol';
    default:
      if (Array.isArray(value)) return 'array';
      if (value === null) return 'null';
      if (value instanceof Promise) return 'promise';
      if (value instanceof Map) return 'map';
      if (value instanceof Set) return 'set';
      if (value instanceof Date) return 'date';
      return 'object';
  }
}

/** zod 3's way of listing allowed values: `'a' | 'b' | 4`. */
export function joinValues(values: readonly unknown[], separator = ' | '): string {
  return values.map((v) => (typeof v === 'string' ? `'${v}'` : String(v))).join(separator);
}

/** What a zod 4 raw issue was in zod 3, for the message. */
type RawIssue = z.core.$ZodRawIssue;

/** The schema that raised an issue: its kind tells an enum's refusal from a literal's. */
const kindOf = (issue: RawIssue): string | undefined =>
  (issue.inst as { _zod?: { def?: { type?: string } } } | undefined)?._zod?.def?.type;

function zod3Message(issue: RawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type': {
      if (issue.input === undefined) return 'Required';
      if (issue.expected === 'int' && typeof issue.input === 'number')
        return 'Expected integer, received float';
      return `Expected ${issue.expected === 'int' ? 'integer' : issue.expected}, received ${receivedType(issue.input)}`;
    }
    case 'invalid_value': {
      if (kindOf(issue) === 'enum') {
        if (typeof issue.input !== 'string')
          return issue.input === undefined
            ? 'Required'
            : `Expected ${joinValues(issue.values)}, received ${receivedType(issue.input)}`;
        return `Invalid enum value. Expected ${joinValues(issue.values)}, received '${issue.input}'`;
      }
      return `Invalid literal value, expected ${JSON.stringify(issue.values[0])}`;
    }
    case 'unrecognized_keys':
      return `Unrecognized key(s) in object: ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
    case 'invalid_union':
      if (issue.note === 'No matching discriminator')
        return `Invalid discriminator value. Expected ${joinValues((issue as { options?: unknown[] }).options ?? [])}`;
      return 'Invalid input';
    case 'invalid_format':
      if (issue.format === 'regex') return 'Invalid';
      if (issue.format === 'datetime') return 'Invalid datetime';
      return `Invalid ${issue.format}`;
    case 'too_small':
      return tooSmall(issue.origin, Number(issue.minimum), issue.inclusive, issue.exact);
    case 'too_big':
      return tooBig(issue.origin, Number(issue.maximum), issue.inclusive, issue.exact);
    case 'not_multiple_of':
      return `Number must be a multiple of ${String(issue.divisor)}`;
    default:
      return 'Invalid input';
  }
}

function tooSmall(origin: string, minimum: number, inclusive = true, exact = false): string {
  if (origin === 'array' || origin === 'set')
    return `Array must contain ${exact ? 'exactly' : inclusive ? 'at least' : 'more than'} ${minimum} element(s)`;
  if (origin === 'string')
    return `String must contain ${exact ? 'exactly' : inclusive ? 'at least' : 'over'} ${minimum} character(s)`;
  if (origin === 'number' || origin === 'int' || origin === 'bigint')
    return `Number must be ${exact ? 'exactly equal to ' : inclusive ? 'greater than or equal to ' : 'greater than '}${minimum}`;
  return 'Invalid input';
}

function tooBig(origin: string, maximum: number, inclusive = true, exact = false): string {
  if (origin === 'array' || origin === 'set')
    return `Array must contain ${exact ? 'exactly' : inclusive ? 'at most' : 'less than'} ${maximum} element(s)`;
  if (origin === 'string')
    return `String must contain ${exact ? 'exactly' : inclusive ? 'at most' : 'under'} ${maximum} character(s)`;
  if (origin === 'number' || origin === 'int' || origin === 'bigint')
    return `Number must be ${exact ? 'exactly' : inclusive ? 'less than or equal to' : 'less than'} ${maximum}`;
  return 'Invalid input';
}
