import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { isValidRange } from '../net/address-policy.js';
import { joinValues, parseOptions } from '../validation/zod-messages.js';

/**
 * The pieces every settings file is built from: zod parsers for the kinds of values environment
 * variables hold, and the documentation each variable carries (docs/configuration.md is generated
 * from it by `npm run docs:config`, and a test fails when that page is stale).
 */

/** The processes that read settings: `npm run api|worker|result-host|migrate|admin`, and `npm start`. */
export type ProcessName = 'api' | 'worker' | 'result-host' | 'console' | 'migrate' | 'admin' | 'start';

export interface SettingDoc {
  /** The processes that use the value (api, worker and result host all parse the whole schema). */
  readBy: readonly ProcessName[];
  /** What it means, in one or two sentences of Markdown. */
  text: string;
  /** The default as a reader should see it, when the schema's own is derived or absent. */
  default?: string;
}

/** One concern's variables: the zod shape that parses them and, for each, its documentation. */
export interface SettingGroup<Shape extends z.ZodRawShape> {
  title: string;
  shape: Shape;
  docs: { readonly [K in keyof Shape]: SettingDoc };
}

/** Declares a group; the type makes a variable without documentation a compile error. */
export const settingGroup = <Shape extends z.ZodRawShape>(group: SettingGroup<Shape>): SettingGroup<Shape> =>
  group;

/** A variable's message when it is unset; any other problem keeps zod's message. */
export const requiredError = (message: string) => (issue: { input: unknown }) =>
  issue.input === undefined ? message : undefined;

/**
 * An enum whose refusal lists its values in the order written: zod 4 keeps an enum's values as an
 * object's keys, which puts integer-like ones ('1', '0') first.
 */
export const inOrder = <T extends string>(values: readonly [T, ...T[]]) =>
  z.enum(values, {
    // Environment variables are text; anything else keeps zod's own message.
    error: (issue) =>
      typeof issue.input === 'string'
        ? `Invalid enum value. Expected ${joinValues(values)}, received '${issue.input}'`
        : undefined,
  });

export const int = (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback);

/** Comma-separated address ranges (CIDRs or single addresses), none by default. */
export const addressRanges = () =>
  z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(/[\s,]+/)
        .map((range) => range.trim())
        .filter(Boolean),
    )
    .refine((ranges) => ranges.every(isValidRange), {
      message: 'must be comma-separated CIDRs or addresses, such as 10.20.0.0/16,fd12::/64',
    });

/** A TCP port that is off until set. */
export const optionalPort = () => z.coerce.number().int().min(1).max(65_535).optional();

/** A credential: absent when unset or blank. */
export const secret = z
  .string()
  .optional()
  .transform((value) => (value?.trim() ? value.trim() : undefined));

/** An optional variable for which blank means unset (docker-compose passes `${VAR:-}` through as ''). */
export const blankIsUnset = <T extends z.ZodType>(schema: T) =>
  z.preprocess(
    (value) => (typeof value === 'string' && value.trim() === '' ? undefined : value),
    schema.optional(),
  );

/** A provider's base URL, without a trailing slash. */
export const baseUrl = (fallback: string) =>
  z
    .string()
    .url()
    .default(fallback)
    .transform((url) => url.replace(/\/+$/, ''));

/** A PEM certificate or key: the PEM text itself, or the path of a file holding it (read once, at start). */
export const pem = z
  .string()
  .optional()
  .transform((value, ctx): Buffer | undefined => {
    const text = value?.trim();
    if (!text) return undefined;
    // PEM text; from an .env file its line breaks may arrive as the two characters \n.
    if (text.startsWith('-----BEGIN'))
      return Buffer.from(`${text.includes('\n') ? text : text.replaceAll('\\n', '\n')}\n`);
    try {
      return readFileSync(text);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      // The value is not echoed: it may be a key in a form we do not read (base64, quoted).
      ctx.addIssue({
        code: 'custom',
        message: `is not PEM text, and no file of that name can be read (${code}); give the PEM text or a PEM file's path`,
      });
      return z.NEVER;
    }
  });

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Parses `env` with `schema`; throws a ConfigError naming every bad variable. */
export function parseEnv<Schema extends z.ZodType>(schema: Schema, env: NodeJS.ProcessEnv): z.output<Schema> {
  const parsed = schema.safeParse(env, parseOptions);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
