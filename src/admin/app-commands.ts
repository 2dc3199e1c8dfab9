import { getAccountOrThrow } from '../db/accounts-repository.js';
import { grantById, listGrants, revokeGrantRecord } from '../db/oauth-grants-repository.js';
import { CommandRefused, str, type Command } from './command.js';

/** Chat apps connected by OAuth (the console's Connected apps), for support. */
export const appCommands: Record<string, Command> = {
  apps: {
    summary:
      'List the chat apps an account connected through OAuth: grant id, app, client id, the key id its calls are logged under, approved, last used, state.',
    usage: '--account ACCOUNT',
    options: { account: { type: 'string', required: true } },
    async run({ db }, v) {
      const account = await getAccountOrThrow(db, str(v.account));
      const grants = await listGrants(db, account.id);
      return {
        json: grants,
        text: grants.length
          ? grants.map(
              (g) =>
                `${g.grant_id}  ${g.client_name ?? '(no name)'}  ${g.client_id}  as ${g.api_key_id}  approved ${g.created_at}  last used ${g.last_used_at ?? 'never'}  ${g.revoked_at ? `revoked ${g.revoked_at}` : 'connected'}`,
            )
          : [`${account.id} has no connected app.`],
      };
    },
  },
  'revoke-app': {
    summary:
      'Disconnect a chat app (a grant from `apps`): its access and refresh tokens stop working at once; the app must be approved again.',
    usage: '--grant GRANT_ID',
    options: { grant: { type: 'string', required: true } },
    async run({ db }, v) {
      const grantId = str(v.grant);
      const grant = await grantById(db, grantId);
      if (!grant) throw new CommandRefused('not_found', `No connected app ${grantId} (see apps --account).`);
      await revokeGrantRecord(db, grantId);
      return {
        json: { grant_id: grantId, account_id: grant.account_id, revoked: true },
        text: [`Disconnected ${grant.client_name ?? grant.client_id} (${grantId}) from ${grant.account_id}.`],
      };
    },
  },
};
