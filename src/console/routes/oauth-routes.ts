import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type Provider from 'oidc-provider';
import { MCP_SCOPE } from '../../auth/oauth-resource.js';
import { getBalance } from '../../db/credits-repository.js';
import { setKeyRules, type KeyRules } from '../../db/key-limits.js';
import { findGrant, liveGrantOf, recordGrant, revokeGrantRecord } from '../../db/oauth-grants-repository.js';
import { endOAuthSession } from '../../db/oauth-store.js';
import { interactionPath } from '../oauth/authorization-server.js';
import { format, sendPage } from '../render.js';
import { appDefaultLimits, limitsOfForm, manageRefusal, rulesOfForm } from './key-rules-form.js';
import { formField, SESSION_COOKIE } from '../request-fields.js';
import type { ConsoleRouteDeps, OAuthConsoleDeps } from '../route-deps.js';
import { csrfTokenFor, sameToken } from '../session-ids.js';
import type { ConsoleUser } from '../sessions.js';
import { formRedirectSource } from '../security.js';

type Interaction = Awaited<ReturnType<Provider['interactionDetails']>>;

/**
 * The authorization server's interaction: a chat app sent the person here to connect. The person
 * signs in to the console as usual (the sign-in page brings them back), then approves or denies on
 * a consent page naming the app and what it can spend. Approving makes (or reuses) the account's
 * grant for that app, which acts as a key row of its own (oauth-grants-repository.ts).
 *
 * These routes check the session and the form token themselves (consolePublic): the console's
 * session cookie is SameSite=Strict, so the first arrival, a redirect started by the app's site,
 * comes without it; the page then loads itself once more from this site, which sends it.
 */
export function oauthRoutes(
  app: FastifyInstance,
  deps: ConsoleRouteDeps & { oauth: OAuthConsoleDeps },
): void {
  const { provider, resource } = deps.oauth;

  /** The interaction of this browser (its cookie), if it is the one in the path. */
  const interactionOf = async (request: FastifyRequest<{ Params: { uid: string } }>, reply: FastifyReply) => {
    const details = await provider.interactionDetails(request.raw, reply.raw).catch(() => null);
    return details && details.uid === request.params.uid ? details : null;
  };
  const expired = (request: FastifyRequest, reply: FastifyReply) =>
    sendPage(
      request,
      reply,
      'error',
      {
        title: 'Sign-in expired',
        message:
          'This sign-in has expired or belongs to another browser. Go back to the app and connect again.',
      },
      400,
    );
  const signedInUser = async (request: FastifyRequest): Promise<ConsoleUser | null> => {
    const resumed = await deps.sessions.resume(request.cookies[SESSION_COOKIE]);
    if (!resumed.ok) return null;
    request.consoleUser = resumed.user;
    return resumed.user;
  };

  app.get<{ Params: { uid: string }; Querystring: { again?: string } }>(
    '/oauth/interaction/:uid',
    { config: { consolePublic: true } },
    async (request, reply) => {
      const details = await interactionOf(request, reply);
      if (!details) return expired(request, reply);
      const here = interactionPath(details.uid);
      const user = await signedInUser(request);
      if (!user) {
        if (request.query.again === undefined) {
          // Loaded again by this page (Refresh), the navigation is this site's own: the cookie comes.
          reply.header('refresh', `0; url=${here}?again`);
          return sendPage(request, reply, 'oauth-continue', {
            title: 'Connecting an app',
            next: `${here}?again`,
          });
        }
        return reply.redirect(`/sign-in?next=${encodeURIComponent(here)}`, 303);
      }
      // Approving or denying ends in a redirect to the app, which the form's CSP must allow.
      request.formRedirectsTo = formRedirectSource(String(details.params.redirect_uri));
      return sendPage(request, reply, 'consent', await consentPage(details, user));
    },
  );

  app.post<{ Params: { uid: string } }>(
    '/oauth/interaction/:uid',
    { config: { consolePublic: true } },
    async (request, reply) => {
      const user = await signedInUser(request);
      if (!user)
        return reply.redirect(
          `/sign-in?next=${encodeURIComponent(interactionPath(request.params.uid))}`,
          303,
        );
      if (!sameToken(csrfTokenFor(user.sessionId), formField(request.body, '_csrf')))
        return reply
          .code(403)
          .type('text/plain')
          .send('This form has expired or did not come from this site.');
      const details = await interactionOf(request, reply);
      if (!details) return expired(request, reply);
      await endSessionOfAnotherAccount(details, user.accountId);
      if (formField(request.body, 'decision') !== 'approve') {
        const denied = { error: 'access_denied', error_description: 'The account holder declined.' };
        reply.hijack();
        return provider.interactionFinished(request.raw, reply.raw, denied, {
          mergeWithLastSubmission: false,
        });
      }
      // The app's limits, as the person chose them on the page (its key's rules); a session of a key
      // with rules of its own may not connect an app (it could give the app more than it has).
      const refusal = await manageRefusal(deps.db, user);
      const rules = rulesOfForm(request.body, appDefaultLimits);
      if (refusal || !rules.ok) {
        const message = refusal ?? (rules.ok ? '' : rules.message);
        const page = { ...(await consentPage(details, user)), message, values: limitsOfForm(request.body) };
        return sendPage(request, reply, 'consent', page, refusal ? 403 : 400);
      }
      const grantId = await approve(details, user.accountId, rules.rules);
      reply.hijack();
      return provider.interactionFinished(request.raw, reply.raw, {
        login: { accountId: user.accountId },
        consent: { grantId },
      });
    },
  );

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
