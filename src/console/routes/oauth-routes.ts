import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { interactionPath } from '../oauth/authorization-server.js';
import { sendPage } from '../render.js';
import { appDefaultLimits, limitsOfForm, manageRefusal, rulesOfForm } from './key-rules-form.js';
import { oauthConsent } from './oauth-consent.js';
import { formField, SESSION_COOKIE } from '../request-fields.js';
import type { ConsoleRouteDeps, OAuthConsoleDeps } from '../route-deps.js';
import { csrfTokenFor, sameToken } from '../session-ids.js';
import type { ConsoleUser } from '../sessions.js';
import { formRedirectSource } from '../security.js';

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
  const { provider } = deps.oauth;
  const { consentPage, approve, endSessionOfAnotherAccount } = oauthConsent(deps);

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
}
