import type Provider from 'oidc-provider';
import { MCP_SCOPE } from '../../auth/oauth-resource.js';
import { getBalance } from '../../db/credits-repository.js';
import { setKeyRules, type KeyRules } from '../../db/key-limits.js';
import { findGrant, liveGrantOf, recordGrant, revokeGrantRecord } from '../../db/oauth-grants-repository.js';
import { endOAuthSession } from '../../db/oauth-store.js';
import { format } from '../render.js';
import type { ConsoleRouteDeps, OAuthConsoleDeps } from '../route-deps.js';
import type { ConsoleUser } from '../sessions.js';
import { appDefaultLimits } from './key-rules-form.js';

export type Interaction = Awaited<ReturnType<Provider['interactionDetails']>>;

/**
 * What the consent page shows and what approving does (oauth-routes.ts serves them): the page naming
 * the app, where it sends the person and what it may spend; the account's grant for the app; and
 * oidc-provider's own sign-in session let go of when another console account approves.
 */
export function oauthConsent(deps: Pick<ConsoleRouteDeps, 'db'> & { oauth: OAuthConsoleDeps }) {
  const { provider, resource } = deps.oauth;

  /**
   * oidc-provider keeps its own sign-in session (10 minutes, cookie `oauth_session`) beside the
   * console's. When another console account signs in within it, oidc-provider would ask the person to
   * sign out at its end-session page, which is not served (the console's sign-in is the one that
   * counts): that session is ended here instead, and this interaction let go of it, so that the
   * approval is the signed-in account's and ends in the app's code.
   */
  const endSessionOfAnotherAccount = async (details: Interaction, accountId: string) => {
    if (!details.session || details.session.accountId === accountId) return;
    await endOAuthSession(deps.db, details.session.uid);
    details.session = undefined;
    await details.save(Math.max(1, details.exp - Math.floor(Date.now() / 1000)));
  };

  const consentPage = async (details: Interaction, user: ConsoleUser) => {
    const clientId = String(details.params.client_id);
    const client = await provider.Client.find(clientId);
    const balance = await getBalance(deps.db, user.accountId);
    const destination = redirectDestination(String(details.params.redirect_uri));
    const identity = appIdentity(client, clientId, destination.host);
    const documentHost = client?.clientIdMetadataDocument ? hostOf(clientId) : null;
    return {
      title: 'Connect an app',
      uid: details.uid,
      app: identity,
      // Where the name comes from: the app's own document at a host, or its registration here.
      documentHost,
      destination,
      // A document at one host sending the code to another web host: said plainly, before Approve.
      elsewhere: documentHost !== null && destination.kind === 'web' && destination.host !== documentHost,
      resource,
      balance,
      // The limits the app gets unless the person changes them: 100 credits a day, every model.
      values: appDefaultLimits,
      message: null as string | null,
      format,
    };
  };

  /** The account's grant for this app: the live one, given this resource again, or a new one. */
  const approve = async (
    details: Interaction,
    accountId: string,
    rules: Partial<KeyRules>,
  ): Promise<string> => {
    const clientId = String(details.params.client_id);
    const existingId = await liveGrantOf(deps.db, accountId, clientId);
    const existing = existingId ? await provider.Grant.find(existingId) : undefined;
    if (existingId && !existing) await revokeGrantRecord(deps.db, existingId);
    const grant = existing ?? new provider.Grant({ accountId, clientId });
    grant.addResourceScope(resource, MCP_SCOPE);
    // 'mcp' is also a scope of the server's own (a client registers with it), so it is granted as both.
    const scope = details.params.scope;
    const asked = typeof scope === 'string' ? scope.split(' ') : [];
    grant.addOIDCScope([MCP_SCOPE, ...asked.filter((s) => s === 'offline_access')].join(' '));
    const grantId = await grant.save();
    if (!existing) {
      const client = await provider.Client.find(clientId);
      const destination = redirectDestination(String(details.params.redirect_uri));
      await recordGrant(deps.db, {
        grantId,
        accountId,
        clientId,
        clientName: client?.clientName ?? null,
        displayName: appIdentity(client, clientId, destination.host).name,
        resource,
        scope: MCP_SCOPE,
        rules,
      });
    } else {
      // Approved again: the limits chosen now are the app's.
      const record = await findGrant(deps.db, accountId, grantId);
      if (record) await setKeyRules(deps.db, record.api_key_id, rules, accountId);
    }
    return grantId;
  };

  return { consentPage, approve, endSessionOfAnotherAccount };
}

/**
 * How an app is named to the person: the name it gave itself (in its registration or its metadata
 * document: nothing checks it), else the host its client id names (a metadata document's URL), else
 * `unnamed` (where it sends the person back to, for one registered here), else its client id.
 */
export function appIdentity(
  client: { clientName?: string | undefined } | undefined,
  clientId: string,
  unnamed?: string,
): { name: string; clientId: string; selfNamed: boolean } {
  const name = client?.clientName?.trim();
  return name
    ? { name, clientId, selfNamed: true }
    : { name: hostOf(clientId) ?? unnamed ?? clientId, clientId, selfNamed: false };
}

/**
 * Where approving sends the person, and the code with them: this request's redirect URI (one of the
 * app's registered ones, which oidc-provider checked), as a person reads it: a web host, a program on
 * this computer (a loopback address), or an app of this device (its own URI scheme).
 */
export function redirectDestination(redirectUri: string): {
  uri: string;
  kind: 'web' | 'loopback' | 'app';
  host: string;
} {
  const url = new URL(redirectUri);
  if (url.protocol === 'https:') return { uri: redirectUri, kind: 'web', host: url.host };
  if (url.protocol === 'http:') return { uri: redirectUri, kind: 'loopback', host: url.host };
  return { uri: redirectUri, kind: 'app', host: url.protocol.slice(0, -1) };
}

function hostOf(url: string): string | null {
  try {
    return new URL(url).host || null;
  } catch {
    return null;
  }
}
