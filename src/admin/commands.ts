import { describeKeyRules, listKeyStates } from '../db/key-limits.js';
import { keyCommands } from './key-commands.js';
import { parseArgs } from 'node:util';
import type { CommonQueryMethods } from 'slonik';
import {
  createAccount,
  getAccountOrThrow,
  listPurchases,
  purchaseKinds,
  purchaseStatuses,
  recordPurchase,
  setApiAccess,
  type PurchaseKind,
  type PurchaseStatus,
} from '../db/accounts-repository.js';
import { createApiKey } from '../auth/api-key-issuer.js';
import { revokeApiKey } from '../db/api-keys-repository.js';
import { getBalance, grantCredits, type CreditPool } from '../db/credits-repository.js';
import { listRequestLog } from '../db/request-log-repository.js';
import { catalogCommands } from './catalog-commands.js';
import { consoleCommands } from './console-commands.js';
import { appCommands } from './app-commands.js';
import { supportCommands } from './support-commands.js';
import { webhookCommands } from './webhook-commands.js';
import { batchCommands } from './batch-commands.js';
import {
  oneOf,
  optional,
  positiveInt,
  str,
  UsageError,
  type AdminContext,
  type Command,
  type CommandResult,
} from './command.js';

const creditPoolForPurchase: Record<PurchaseKind, CreditPool> = {
  credit_pack: 'one_time',
  gift: 'one_time',
  monthly_subscription: 'subscription',
  yearly_subscription: 'subscription',
};

const commands: Record<string, Command> = {
  'create-account': {
    summary: 'Create an account (no purchase, no credits, no keys).',
    usage: '--email EMAIL [--name NAME]',
    options: { email: { type: 'string', required: true }, name: { type: 'string' } },
    async run({ db }, v) {
      const account = await createAccount(db, { email: str(v.email), name: optional(v.name) });
      return { json: account, text: [`Created account ${account.id} (${account.email}).`] };
    },
  },
  'record-purchase': {
    summary:
      'Record a purchase; a completed one with --credits also grants them (packs and gifts: one-time; subscriptions: subscription).',
    usage: `--account ACCOUNT --kind ${purchaseKinds.join('|')} [--status ${purchaseStatuses.join('|')}] [--credits N]`,
    options: {
      account: { type: 'string', required: true },
      kind: { type: 'string', required: true },
      status: { type: 'string' },
      credits: { type: 'string' },
    },
    async run({ db }, v) {
      const kind = oneOf(v.kind, purchaseKinds, 'kind');
      const status: PurchaseStatus =
        v.status === undefined ? 'completed' : oneOf(v.status, purchaseStatuses, 'status');
      const credits = v.credits === undefined ? 0 : positiveInt(v.credits, 'credits');
      return db.transaction(async (tx) => {
        const account = await getAccountOrThrow(tx, str(v.account));
        const purchase = await recordPurchase(tx, { accountId: account.id, kind, status, credits });
        const text = [`Recorded ${status} ${kind} purchase ${purchase.id} for ${account.id}.`];
        let balance = await getBalance(tx, account.id);
        if (status === 'completed' && credits > 0) {
          balance = await grantCredits(tx, {
            accountId: account.id,
            pool: creditPoolForPurchase[kind],
            amount: credits,
            reason: `purchase ${purchase.id}`,
          });
          text.push(
            `Granted ${credits} ${creditPoolForPurchase[kind].replace('_', '-')} credits; balance ${balance.credits}.`,
          );
        }
        return { json: { purchase, balance }, text };
      });
    },
  },
  'grant-credits': {
    summary: 'Add subscription or one-time credits to an account.',
    usage: '--account ACCOUNT --pool subscription|one_time --amount N [--reason TEXT]',
    options: {
      account: { type: 'string', required: true },
      pool: { type: 'string', required: true },
      amount: { type: 'string', required: true },
      reason: { type: 'string' },
    },
    async run({ db }, v) {
      const pool = oneOf(v.pool, ['subscription', 'one_time'] as const, 'pool');
      const amount = positiveInt(v.amount, 'amount');
      const account = await getAccountOrThrow(db, str(v.account));
      const balance = await grantCredits(db, {
        accountId: account.id,
        pool,
        amount,
        reason: optional(v.reason) ?? 'admin grant',
      });
      return {
        json: balance,
        text: [`Granted ${amount} ${pool} credits to ${account.id}; balance ${balance.credits}.`],
      };
    },
  },
  'create-key': {
    summary:
      'Create an API key (needs a completed paid purchase and a positive balance; at most 5 active). Prints it once.',
    usage: '--account ACCOUNT [--name NAME]',
    options: { account: { type: 'string', required: true }, name: { type: 'string' } },
    async run({ db }, v) {
      const account = await getAccountOrThrow(db, str(v.account));
      const { key, record } = await createApiKey(db, { accountId: account.id, name: optional(v.name) });
      return {
        json: { ...record, key },
        text: [
          `Created key ${record.id} for ${account.id}:`,
          `  ${key}`,
          'Store it now: only its SHA-256 is kept, and it cannot be shown again.',
        ],
      };
    },
  },
  'revoke-key': {
    summary: 'Revoke an API key; it fails on its very next request.',
    usage: '--key KEY_ID',
    options: { key: { type: 'string', required: true } },
    async run({ db }, v) {
      const record = await revokeApiKey(db, str(v.key));
      return {
        json: record,
        text: [`Revoked key ${record.id} (${record.display_prefix}…) of ${record.account_id}.`],
      };
    },
  },
  'disable-access': {
    summary: "Disable an account's API access (its keys answer 403 api_access_disabled).",
    usage: '--account ACCOUNT',
    options: { account: { type: 'string', required: true } },
    async run({ db }, v) {
      const account = await getAccountOrThrow(db, str(v.account));
      await setApiAccess(db, account.id, false);
      return {
        json: { account_id: account.id, api_access_enabled: false },
        text: [`Disabled API access for ${account.id}.`],
      };
    },
  },
  'enable-access': {
    summary: "Restore an account's API access (unrevoked keys work again).",
    usage: '--account ACCOUNT',
    options: { account: { type: 'string', required: true } },
    async run({ db }, v) {
      const account = await getAccountOrThrow(db, str(v.account));
      await setApiAccess(db, account.id, true);
      return {
        json: { account_id: account.id, api_access_enabled: true },
        text: [`Enabled API access for ${account.id}.`],
      };
    },
  },
  'show-account': {
    summary: 'Show an account: access, balance, purchases, keys and its recent request log.',
    usage: '--account ACCOUNT|EMAIL [--log-limit N]',
    options: { account: { type: 'string', required: true }, 'log-limit': { type: 'string' } },
    async run({ db }, v) {
      const account = await getAccountOrThrow(db, str(v.account));
      const limit = v['log-limit'] === undefined ? 20 : positiveInt(v['log-limit'], 'log-limit');
      const [balance, purchases, keys, apps, requests] = await Promise.all([
        getBalance(db, account.id),
        listPurchases(db, account.id),
        listKeyStates(db, account.id, 'key'),
        listKeyStates(db, account.id, 'oauth'),
        listRequestLog(db, account.id, limit),
      ]);
      const text = [
        `${account.id}  ${account.email}${account.name ? `  (${account.name})` : ''}`,
        `  API access: ${account.api_access_enabled ? 'enabled' : 'DISABLED'}; paid purchase: ${account.has_paid_purchase ? 'yes' : 'no'}`,
        `  Credits: ${balance.credits} (subscription ${balance.subscription_credits}, one-time ${balance.one_time_credits})`,
        `  Purchases (${purchases.length}):`,
        ...purchases.map((p) => `    ${p.id}  ${p.kind}  ${p.status}  ${p.credits} credits  ${p.created_at}`),
        `  Keys (${keys.length}):`,
        ...keys.map(
          (k) =>
            `    ${k.id}  ${k.display_prefix}…  ${k.revoked_at ? `revoked ${k.revoked_at}` : 'active'}${k.name ? `  ${k.name}` : ''}\n      ${describeKeyRules(k)}; spent today ${k.spend.today}, in all ${k.spend.total}`,
        ),
        `  Connected apps' keys (${apps.length}):`,
        ...apps.map(
          (k) =>
            `    ${k.id}  ${k.name ?? '(app)'}  ${k.revoked_at ? `revoked ${k.revoked_at}` : 'active'}\n      ${describeKeyRules(k)}; spent today ${k.spend.today}, in all ${k.spend.total}`,
        ),
        `  Recent requests (${requests.length}):`,
        ...requests.map(
          (r) =>
            `    ${r.created_at}  ${r.method} ${r.path}  ${r.status_code}${r.error_code ? ` ${r.error_code}` : ''}  ${r.request_id}  key ${r.api_key_id}`,
        ),
      ];
      return { json: { account, balance, purchases, keys, apps, requests }, text };
    },
  },
  ...supportCommands,
  ...catalogCommands,
  ...consoleCommands,
  ...appCommands,
  ...webhookCommands,
  ...batchCommands,
  ...keyCommands,
};

/** Parses `argv` (without the program name) and runs the command against `db`. */
export async function runAdminCommand(
  argv: string[],
  context: AdminContext | CommonQueryMethods,
): Promise<CommandResult> {
  const ctx: AdminContext =
    'db' in context
      ? context
      : {
          db: context,
          temporal: () =>
            Promise.reject(new UsageError('This command needs Temporal: set TEMPORAL_ADDRESS.')),
        };
  const [name, ...rest] = argv;
  const command = name === undefined ? undefined : commands[name];
  if (!command) throw new UsageError(name ? `Unknown command ${name}.\n\n${usage()}` : usage());
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  const options = { ...command.options, json: { type: 'boolean' as const } };
  try {
    ({ values, positionals } = parseArgs({
      args: valuesAfterTheirOptions(rest, options),
      options,
      strict: true,
      allowPositionals: command.arguments !== undefined,
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nUsage: admin ${name} ${command.usage}`);
  }
  const expected = command.arguments ?? [];
  if (positionals.length !== expected.length)
    throw new UsageError(
      `${name} takes ${expected.length === 1 ? 'one argument' : `${expected.length} arguments`}, ${expected.join(' ')}.\nUsage: admin ${name} ${command.usage}`,
    );
  for (const [option, spec] of Object.entries(command.options)) {
    if (spec.required && values[option] === undefined)
      throw new UsageError(`--${option} is required.\nUsage: admin ${name} ${command.usage}`);
  }
  return command.run(ctx, values, positionals);
}

/**
 * The arguments with each value that starts with a dash joined to its option (`--grant -wzM6…` →
 * `--grant=-wzM6…`): an app's grant id is random base64url, and one in 32 starts with `-`, which
 * parseArgs would otherwise take for an option. An option's value that is one of the command's own
 * options (`--grant --json`) is left as it is: a value forgotten, still a usage error.
 */
function valuesAfterTheirOptions(args: string[], options: Record<string, { type: 'string' | 'boolean' }>) {
  const isOption = (arg: string) =>
    arg === '--' || (arg.startsWith('--') && arg.slice(2).split('=')[0]! in options);
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const [arg, next] = [args[i]!, args[i + 1]];
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    if (name && options[name]?.type === 'string' && next?.startsWith('-') && !isOption(next)) {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

export function usage(): string {
  return [
    'Usage: npm run admin -- <command> [options] [--json]',
    '',
    'Every command takes --json (its result as JSON). ACCOUNT is an account id or its e-mail.',
    'Exit code 1: the command was refused; 2: bad usage. Commands:',
    '',
    ...Object.entries(commands).map(([name, c]) => `  ${`${name} ${c.usage}`.trimEnd()}\n      ${c.summary}`),
  ].join('\n');
}

/** The commands' names, as `npm run admin -- <command>` takes them. */
export function commandNames(): string[] {
  return Object.keys(commands);
}
