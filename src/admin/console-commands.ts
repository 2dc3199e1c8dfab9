import { getAccountOrThrow } from '../db/accounts-repository.js';
import { listApiKeys } from '../db/api-keys-repository.js';
import { createSignInLink } from '../db/console-sessions.js';
import { newSecret, secretHash } from '../console/session-ids.js';
import { CommandRefused, optional, str, type Command } from './command.js';

/** How long a console sign-in link works, once. */
const LINK_VALID_MS = 15 * 60 * 1000;

export const consoleCommands: Record<string, Command> = {
  'console-link': {
    summary:
      "Print a one-time account console sign-in link (15 minutes, single use), bound to the account's newest active key or --key.",
    usage: '--account ACCOUNT [--key KEY_ID]',
    options: { account: { type: 'string', required: true }, key: { type: 'string' } },
    async run({ db, consoleUrl }, v) {
      const account = await getAccountOrThrow(db, str(v.account));
      const active = (await listApiKeys(db, account.id)).filter((k) => !k.revoked_at);
      const wanted = optional(v.key);
      // A console session acts as one of the account's keys, like the API: no key, no session.
      const key = wanted ? active.find((k) => k.id === wanted) : active[0];
      if (!key) {
        throw new CommandRefused(
          'no_active_key',
          wanted
            ? `${wanted} is not an active key of ${account.id}.`
            : `${account.id} has no active API key; create one first (create-key).`,
        );
      }
      const token = newSecret();
      const { expiresAt } = await createSignInLink(db, {
        tokenSha256: secretHash(token),
        accountId: account.id,
        apiKeyId: key.id,
        validMs: LINK_VALID_MS,
      });
      const url = `${(consoleUrl ?? 'http://127.0.0.1:8082').replace(/\/$/, '')}/sign-in/link?token=${token}`;
      return {
        json: { url, account_id: account.id, api_key_id: key.id, expires_at: expiresAt },
        text: [
          `Sign-in link for ${account.id} (as key ${key.id}), valid once until ${expiresAt}:`,
          `  ${url}`,
        ],
      };
    },
  },
};
