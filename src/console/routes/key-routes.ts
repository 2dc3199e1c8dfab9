import type { FastifyInstance } from 'fastify';
import { createApiKey } from '../../auth/api-key-issuer.js';
import { KeyCreationRefused, revokeApiKey } from '../../db/api-keys-repository.js';
import { findKeyState, limitsReachedNow, listKeyStates, setKeyRules } from '../../db/key-limits.js';
import { keysLastUsed } from '../../db/console-reads.js';
import { webhookSecretOf } from '../../db/webhook-secrets.js';
import { newWebhookSecret } from '../../net/webhook-signing.js';
import { claimForm, endSessionsOfKey, keyOfForm, recordFormKey } from '../../db/console-sessions.js';
import { newSecret, secretHash } from '../session-ids.js';
import { formField, SESSION_COOKIE } from '../request-fields.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';
import { keyRulesView, manageRefusal, rulesOfForm } from './key-rules-form.js';

/**
 * API keys: list (each with its rules and its spend in the window against its limit), create (with
 * its rules; the plaintext shown once), change its rules, revoke. The 5-key limit is the
 * repository's (and the table's). A session opened with a key that has rules of its own may look,
 * not make or change keys (it could otherwise make itself a key without them).
 */
export function keyRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  /** The page, with a fresh id for its create form (see POST /keys). */
  const page = async (accountId: string, extra: Record<string, unknown>) => {
    const [keys, lastUsed, reached, webhookSecret] = await Promise.all([
      listKeyStates(deps.db, accountId, 'key'),
      keysLastUsed(deps.db, accountId),
      limitsReachedNow(deps.db, accountId),
      // The same secret GET /v1/webhooks/secret shows (made here if neither was read before).
      webhookSecretOf(deps.db, accountId, newWebhookSecret()),
    ]);
    return {
      title: 'API keys',
      keys: keys.map((k) => ({
        ...k,
        last_used: lastUsed.get(k.id) ?? null,
        rules: keyRulesView(k, reached.get(k.id) ?? null),
      })),
      active: keys.filter((k) => !k.revoked_at).length,
      webhookSecret,
      format,
      created: null,
      message: null,
      formId: newSecret(),
      ...extra,
    };
  };

  app.get('/keys', async (request, reply) =>
    sendPage(request, reply, 'keys', await page(userOf(request).accountId, {})),
  );

  /**
   * Creates a key once per rendered form: the form's random id is marked used in the transaction
   * that creates the key, so a reload of the answer or a double click creates nothing more and is
   * told which key the form made (its secret was shown once, to the first sending).
   */
  app.post('/keys', async (request, reply) => {
    const user = userOf(request);
    const refusal = await manageRefusal(deps.db, user);
    if (refusal)
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: refusal }), 403);
    const rules = rulesOfForm(request.body);
    if (!rules.ok)
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: rules.message }), 400);
    const name = (formField(request.body, 'name') ?? '').trim().slice(0, 100) || undefined;
    const formId = formField(request.body, 'form_id') ?? '';
    if (!/^[A-Za-z0-9_-]{43}$/.test(formId)) {
      const message = 'This form is out of date: no key was created. Create the key from this page.';
      return sendPage(request, reply, 'keys', await page(user.accountId, { message }), 400);
    }
    const form = { formSha256: secretHash(formId), accountId: user.accountId };
    try {
      const created = await deps.db.transaction(async (tx) => {
        if (!(await claimForm(tx, form))) return null;
        const made = await createApiKey(tx, { accountId: user.accountId, name });
        await setKeyRules(tx, made.record.id, rules.rules);
        await recordFormKey(tx, form.formSha256, made.record.id);
        return made;
      });
      if (created) {
        // Shown in this answer only (never stored, never cached: cache-control no-store).
        return sendPage(request, reply, 'keys', await page(user.accountId, { created }), 201);
      }
    } catch (error) {
      if (!(error instanceof KeyCreationRefused)) throw error;
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: error.message }), 409);
    }
    const keyId = await keyOfForm(deps.db, form);
    const made = keyId ? await findKeyState(deps.db, keyId, user.accountId) : null;
    const message = made
      ? `This form was already sent: it created the key ${made.display_prefix}…${made.name ? ` named “${made.name}”` : ''}, whose secret was shown then. No other key was created.`
      : 'This form was already sent. No other key was created.';
    return sendPage(request, reply, 'keys', await page(user.accountId, { message }), 409);
  });

  /** Changes a key's rules: from the next request on, on every API process. */
  app.post<{ Params: { id: string } }>('/keys/:id/rules', async (request, reply) => {
    const user = userOf(request);
    const owned = await findKeyState(deps.db, request.params.id, user.accountId);
    if (!owned || owned.kind !== 'key')
      return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    const refusal = await manageRefusal(deps.db, user);
    if (refusal)
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: refusal }), 403);
    const rules = rulesOfForm(request.body);
    if (!rules.ok)
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: rules.message }), 400);
    await setKeyRules(deps.db, owned.id, rules.rules, user.accountId);
    return reply.redirect('/keys', 303);
  });

  app.post<{ Params: { id: string } }>('/keys/:id/revoke', async (request, reply) => {
    const user = userOf(request);
    const owned = await findKeyState(deps.db, request.params.id, user.accountId);
    if (!owned || owned.kind !== 'key')
      return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    const refusal = owned.id === user.keyId ? null : await manageRefusal(deps.db, user);
    if (refusal)
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: refusal }), 403);
    await revokeApiKey(deps.db, owned.id);
    await endSessionsOfKey(deps.db, owned.id);
    if (owned.id === user.keyId) {
      const ended = 'Your session has ended: you revoked the key it was opened with.';
      return reply
        .clearCookie(SESSION_COOKIE, deps.cookie)
        .redirect(`/sign-in?ended=${encodeURIComponent(ended)}`, 303);
    }
    return reply.redirect('/keys', 303);
  });
}
