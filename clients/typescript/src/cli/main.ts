import { parseArgs, type ParseArgsConfig } from 'node:util';
import { Client } from '../client.js';
import { ApiError, GenerationClientError, MissingApiKeyError } from '../core/errors.js';
import { priceRange } from '../pricing.js';
import type { ApiKey, Generation, GenerationStatus } from '../types.js';
import { batchCommand } from './batch-command.js';
import { chooseApiKey, chooseBaseURL, readConfig } from './config-file.js';
import { exitCodeOf, UsageError } from './exit-codes.js';
import { table } from './format.js';
import { listenCommand } from './listen-command.js';
import { login } from './login.js';
import { mcpCommand } from './mcp-command.js';
import { parseNumericOptions } from './options.js';
import { runCommand, saveFiles, waitAndSave, type Io, type RunFlags } from './run-command.js';

export const usage = `gen: the Generation API from the command line

  gen models                          the models: id, media, price range
  gen models show MODEL               a model's options: types, defaults, allowed values, prices
  gen run MODEL "prompt" [-p name=value]... [--params-json FILE|-] [--max-credits N]
          [--no-wait] [--no-download] [-o DIR] [--timeout 30s|5m] [--idempotency-key KEY]
  gen get ID | gen wait ID | gen download ID [-o DIR] | gen cancel ID
  gen list [--status S[,S]] [--model M] [--limit N]
  gen credits
  gen key                             the key in use: access, models, spend limit, what is left
  gen batch FILE.jsonl [--out DIR] [--window 24h] [--idempotency-key KEY] [--timeout 1h]
  gen batch --resume ID [--out DIR]   a batch from a JSONL file (one request a line, each with its
                                      custom_id): a progress bar while it runs, each line's files
                                      into DIR/<custom_id>/ as it finishes (default batches/<id>);
                                      Ctrl-C leaves it running, --resume downloads what is missing
  gen listen [--forward-to URL] [--events TYPE[,TYPE]]
                                      follow the account's events; with --forward-to, POST each
                                      to URL signed as a webhook is (try a receiver locally)
  gen mcp                             the service's MCP server over stdio, for an agent that starts
                                      its tools as a command (calls {base URL}/mcp with your key)
  gen login                           store an API key (typed unseen, or piped in) in the config file

Options: --json (automatic when stdout is not a terminal), --jsonl (a line per status change),
  --api-key KEY, --base-url URL (they win over GENERATION_API_KEY, GENERATION_BASE_URL).
Durations: 30 (seconds), 30s, 5m, 1h.
Exit codes: 0 done, 1 other error, 2 usage, 3 auth, 4 credits, 5 failed, 6 rejected,
  7 still running at timeout, 130 interrupted (gen batch: the worst of its lines; canceled and
  expired lines count as failed).
`;

const options = {
  param: { type: 'string', short: 'p', multiple: true },
  'params-json': { type: 'string' },
  'max-credits': { type: 'string' },
  'idempotency-key': { type: 'string' },
  'no-wait': { type: 'boolean' },
  'no-download': { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  out: { type: 'string' },
  resume: { type: 'string' },
  window: { type: 'string' },
  timeout: { type: 'string' },
  json: { type: 'boolean' },
  jsonl: { type: 'boolean' },
  status: { type: 'string' },
  model: { type: 'string' },
  limit: { type: 'string' },
  'forward-to': { type: 'string' },
  events: { type: 'string' },
  'api-key': { type: 'string' },
  'base-url': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} satisfies ParseArgsConfig['options'];

/** Runs one gen command; the exit code is returned (bin/gen.js exits with it). */
export async function main(argv: string[], io: Io, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    let parsed;
    try {
      parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    const { values, positionals } = parsed;
    const [command, ...rest] = positionals;
    if (values.help || !command) {
      (command ? io.stdout : io.stderr).write(usage);
      return command || values.help ? 0 : 2;
    }
    // Before anything else (the config file, any request): a bad number is a usage error, exit 2.
    const numbers = parseNumericOptions(values);
    const {
      timeout: _timeout,
      'max-credits': _maxCredits,
      limit: _limit,
      out: _out,
      resume: _resume,
      window: _window,
      ...others
    } = values;
    const flags: RunFlags = {
      ...others,
      ...numbers,
      param: values.param ?? [],
      json: values.json ?? (!io.stdout.isTTY && !values.jsonl),
      jsonl: values.jsonl ?? false,
    };
    if (command === 'login') return await login(values['api-key'], values['base-url'], io, env);
    const stored = await readConfig(env);
    const apiKey = chooseApiKey(env, values['api-key'], stored);
    if (!apiKey)
      throw new MissingApiKeyError('No API key: pass --api-key, set GENERATION_API_KEY, or run gen login.');
    const client = new Client({
      apiKey,
      baseURL: chooseBaseURL(env, values['base-url'], stored),
    });
    const id = () => {
      if (!rest[0]) throw new UsageError(`gen ${command} needs a generation id`);
      return rest[0];
    };
    const json = (value: unknown) => io.stdout.write(JSON.stringify(value, null, 2) + '\n');
    switch (command) {
      case 'models':
        if (rest[0] === 'show') return await showModel(client, rest[1], flags, io);
        return await listModels(client, flags, io);
      case 'run':
        if (rest.length !== 2) throw new UsageError('gen run MODEL "prompt"');
        return await runCommand(client, rest[0]!, rest[1]!, flags, io);
      case 'get':
        json(await client.generations.get(id()));
        return 0;
      case 'wait':
        return await waitAndSave(client, id(), flags, io);
      case 'download': {
        const generation = await client.generations.get(id());
        if (generation.status !== 'succeeded')
          throw new UsageError(`${generation.id} is ${generation.status}: nothing to download`);
        await saveFiles(generation, { ...flags, json: false }, io);
        return 0;
      }
      case 'cancel':
        json(await client.generations.cancel(id()));
        return 0;
      case 'credits': {
        const balance = await client.credits.get();
        if (flags.json) json(balance);
        else
          io.stdout.write(
            `${balance.credits} credits (${balance.subscription_credits} subscription, ${balance.one_time_credits} one-time)\n`,
          );
        return 0;
      }
      case 'key': {
        const key = await client.key.get();
        if (flags.json) json(key);
        else io.stdout.write(describeKey(key));
        return 0;
      }
      case 'batch':
        if (rest.length > 1)
          throw new UsageError('gen batch FILE --out DIR, or gen batch --resume ID --out DIR');
        return await batchCommand(
          client,
          rest[0],
          {
            resume: values.resume,
            out: values.out ?? values.output,
            window: values.window,
            'idempotency-key': values['idempotency-key'],
            timeoutMs: numbers.timeoutMs,
            json: flags.json,
          },
          io,
        );
      case 'list':
        return await list(client, values, numbers.limit ?? 20, flags, io);
      case 'mcp':
        if (rest.length > 0) throw new UsageError('gen mcp takes no arguments');
        return await mcpCommand({ apiKey, baseURL: client.baseURL }, io);
      case 'listen':
        if (rest.length > 0) throw new UsageError('gen listen [--forward-to URL] [--events TYPES]');
        return await listenCommand(client, { ...values, json: flags.json || flags.jsonl }, io);
      default:
        throw new UsageError(`unknown command ${command}\n\n${usage}`);
    }
  } catch (error) {
    io.stderr.write(`gen: ${describe(error)}\n`);
    return exitCodeOf(error);
  }
}

function describe(error: unknown): string {
  if (error instanceof ApiError) {
    const issues = error.issues?.map((i) => `\n  ${i.field || 'body'}: ${i.message}`).join('') ?? '';
    return `${error.message}${issues}${error.requestId ? ` (request ${error.requestId})` : ''}`;
  }
  if (error instanceof GenerationClientError || error instanceof UsageError) return error.message;
  return error instanceof Error ? error.message : String(error);
}

async function listModels(client: Client, flags: RunFlags, io: Io): Promise<number> {
  const models = await client.models.list();
  if (flags.json) {
    io.stdout.write(JSON.stringify(models, null, 2) + '\n');
    return 0;
  }
  const rows = models.map((m) => {
    const range = priceRange(m);
    const per = range.unit === 'second' ? ' /s' : '';
    return [
      m.id,
      m.media_type,
      range.min === range.max ? `${range.min}${per}` : `${range.min}–${range.max}${per}`,
    ];
  });
  io.stdout.write(table([['MODEL', 'MEDIA', 'CREDITS'], ...rows]) + '\n');
  return 0;
}

async function showModel(client: Client, id: string | undefined, flags: RunFlags, io: Io): Promise<number> {
  if (!id) throw new UsageError('gen models show MODEL');
  const model = await client.models.get(id);
  if (flags.json) {
    io.stdout.write(JSON.stringify(model, null, 2) + '\n');
    return 0;
  }
  const { pricing } = model;
  const priceFor = (name: string, value: string | number | boolean | undefined) => {
    if (value === undefined) return '';
    if (pricing.by === name) return `${pricing.credits[String(value)] ?? '?'}`;
    const surcharge = pricing.surcharges[name]?.[String(value)];
    return surcharge ? `+${surcharge}` : '';
  };
  const rows = Object.entries(model.options).map(([name, option]) => {
    const values = option.values ?? (option.type === 'boolean' ? [false, true] : []);
    const allowed = values.map((v) => {
      const price = priceFor(name, v);
      return price ? `${v} (${price})` : String(v);
    });
    return [
      name,
      option.type,
      option.default === undefined ? '' : String(option.default),
      allowed.join(', '),
    ];
  });
  io.stdout.write(
    `${model.id}: ${model.name} (${model.media_type})\n${model.description}\n` +
      `prompt: ${model.prompt.min_length}–${model.prompt.max_length} characters; images: up to ${model.max_images}` +
      `${model.accepts_data_uris ? ' (HTTPS URLs or @file)' : ' (HTTPS URLs)'}\n` +
      `price: ${model.default_price} credits with the defaults; per ${pricing.unit}` +
      `${pricing.by ? `, by ${pricing.by}` : ''}\n\n` +
      table([['OPTION', 'TYPE', 'DEFAULT', 'ALLOWED (credits)'], ...rows]) +
      '\n',
  );
  return 0;
}

async function list(
  client: Client,
  values: { status?: string | undefined; model?: string | undefined },
  limit: number,
  flags: RunFlags,
  io: Io,
): Promise<number> {
  const found: Generation[] = [];
  const pager = client.generations.list({
    ...(values.status ? { status: values.status.split(',') as GenerationStatus[] } : {}),
    ...(values.model ? { model: values.model } : {}),
    limit: Math.min(100, limit),
  });
  for await (const generation of pager) {
    found.push(generation);
    if (found.length >= limit) break;
  }
  if (flags.json) {
    io.stdout.write(JSON.stringify(found, null, 2) + '\n');
    return 0;
  }
  const rows = found.map((g) => [g.id, g.status, g.model, String(g.credits), g.created_at]);
  io.stdout.write(table([['ID', 'STATUS', 'MODEL', 'CREDITS', 'CREATED'], ...rows]) + '\n');
  return 0;
}

/** `gen key` for a person: the key's rules and spend in a few lines. */
function describeKey(key: ApiKey): string {
  const limit =
    key.spend_limit === null
      ? 'no spend limit of its own (the balance is the bound)'
      : `${key.limit_remaining} of ${key.spend_limit} credits left ${key.limit_reset === 'none' ? 'in all' : `this ${windowOf[key.limit_reset]}`}${key.resets_at ? `; resets ${key.resets_at}` : ''}`;
  return (
    `${key.prefix}…${key.name ? `  ${key.name}` : ''}  (${key.id}, ${key.access === 'full' ? 'full access' : 'read-only'})\n` +
    `limit:  ${limit}\n` +
    `models: ${key.models === null ? 'all' : key.models.join(', ') || 'none'}\n` +
    `spent:  ${key.spend.today} today, ${key.spend.this_week} this week, ${key.spend.this_month} this month, ${key.spend.total} in all\n`
  );
}

const windowOf = { daily: 'day (UTC)', weekly: 'week (UTC)', monthly: 'month (UTC)' } as const;
