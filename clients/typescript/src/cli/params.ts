import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Model, ModelOption } from '../types.js';
import { UsageError } from './exit-codes.js';

const mimeOf: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
};

/** `@file` → a data URI (the models that take them say so); anything else (an HTTPS URL) as it is. */
async function imageValue(text: string, cwd: string): Promise<string> {
  if (!text.startsWith('@')) return text;
  const file = path.resolve(cwd, text.slice(1));
  const mime = mimeOf[path.extname(file).toLowerCase()];
  if (!mime) throw new UsageError(`${text}: not a .png, .jpg, .webp or .gif file`);
  const bytes = await readFile(file).catch(() => {
    throw new UsageError(`${text}: cannot read ${file}`);
  });
  return `data:${mime};base64,${bytes.toString('base64')}`;
}

/** One value converted by the option's type in the model's schema (the server still validates it). */
function scalar(name: string, text: string, option: ModelOption | undefined): unknown {
  if (!option) return text;
  if (option.type === 'boolean') {
    if (/^(true|yes|1|on)$/i.test(text)) return true;
    if (/^(false|no|0|off)$/i.test(text)) return false;
    throw new UsageError(`-p ${name}=${text}: expected true or false`);
  }
  if (option.type === 'integer_enum') {
    const number = Number(text);
    if (!Number.isInteger(number))
      throw new UsageError(`-p ${name}=${text}: expected one of ${option.values?.join(', ')}`);
    return number;
  }
  return text;
}

/**
 * The request body from `-p name=value` pairs (and a --params-json object under them): values
 * typed by the model's options; `images` collects every value given (comma-separated or repeated),
 * `@path` reads a local image into a data URI.
 */
export async function buildBody(
  model: Model,
  prompt: string,
  pairs: string[],
  json: Record<string, unknown> = {},
  cwd = process.cwd(),
): Promise<Record<string, unknown>> {
  const body: Record<string, unknown> = { ...json, model: model.id, prompt };
  const images: string[] = Array.isArray(json.images) ? [...(json.images as string[])] : [];
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`-p ${pair}: expected name=value`);
    const name = pair.slice(0, at);
    const text = pair.slice(at + 1);
    const option = model.options[name];
    if (name === 'images') {
      for (const part of text.split(',').filter(Boolean)) images.push(await imageValue(part, cwd));
    } else if (option?.type === 'image') {
      body[name] = await imageValue(text, cwd);
    } else {
      body[name] = scalar(name, text, option);
    }
  }
  if (images.length > 0) body.images = images;
  return body;
}
