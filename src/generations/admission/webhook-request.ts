import { generationEventTypes, type GenerationEventType } from '../../db/generation-events.js';
import type { GenerationWebhook } from '../../db/generation-webhooks.js';
import type { ValidationIssue } from '../../vocabulary/errors.js';
import { OutboundFetchError } from '../../net/outbound-fetch-error.js';
import { checkUrl } from '../../net/outbound-fetch.js';
import { defaultWebhookResolver, type WebhookResolver } from '../../net/webhook-resolver.js';
import { webhookTarget, type WebhookTargetRules } from '../../net/webhook-target.js';

/** What a subscription gets without `events`: the events that end a generation or its content. */
export const defaultWebhookEvents: GenerationEventType[] = [
  'generation.succeeded',
  'generation.failed',
  'generation.rejected',
  'generation.content_expired',
];

/** The event types a subscription may name, and those it gets without `events`. */
export interface WebhookEventChoice {
  known: readonly string[];
  defaults: readonly string[];
}

/** A generation's subscription (POST /v1/generations `webhook`). */
export const generationWebhookEvents: WebhookEventChoice = {
  known: generationEventTypes,
  defaults: defaultWebhookEvents,
};

/** How webhook URLs are checked (the webhooks' own rules and resolver). */
export interface WebhookCheckRules extends WebhookTargetRules {
  /** WEBHOOK_DNS_*: how the URL's name is resolved (default: the system's name servers, 3 s, 64 at once). */
  resolver?: WebhookResolver;
}

/** How webhooks are checked and what a subscription keeps: the retry schedule. */
export interface WebhookSettings extends WebhookCheckRules {
  retryDelaysMs: number[];
}

export type WebhookCheck =
  { ok: true; webhook: GenerationWebhook | null } | { ok: false; issues: ValidationIssue[] };

/**
 * The issue code of a webhook URL whose host name could not be resolved now (its name servers did
 * not answer, or failed): a passing failure, unlike a name that does not exist. A batch's line is
 * admitted again later for it, not refused.
 */
export const dnsUnavailableCode = 'dns_unavailable';

const issue = (field: string, message: string, code = 'invalid_value'): ValidationIssue => ({
  field,
  code,
  message,
});

/**
 * The body's `webhook` field (issue 30 §3), checked by the outbound rules (HTTPS, no credentials,
 * no address that is not public unless WEBHOOK_ALLOW_CIDRS allows it; http on loopback in
 * development), its name resolved now as it would be at a delivery (each delivery checks again:
 * DNS can change). Absent: no webhook. `choice`: the subject's event types (a generation's by
 * default; a batch's for POST /v1/batches).
 */
export async function checkWebhook(
  value: unknown,
  rules: WebhookCheckRules,
  choice: WebhookEventChoice = generationWebhookEvents,
): Promise<WebhookCheck> {
  if (value === undefined) return { ok: true, webhook: null };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { ok: false, issues: [issue('webhook', 'Expected an object with a url.', 'invalid_type')] };
  const { url, events, ...rest } = value as Record<string, unknown>;
  const issues: ValidationIssue[] = Object.keys(rest).map((key) =>
    issue(`webhook.${key}`, 'Unknown field.', 'unrecognized_keys'),
  );
  if (typeof url !== 'string' || url.length === 0 || codePoints(url) > 2048)
    issues.push(issue('webhook.url', 'Expected an https URL of at most 2048 characters.', 'invalid_type'));
  else {
    const problem = await urlProblem(url, rules);
    if (problem) issues.push(typeof problem === 'string' ? issue('webhook.url', problem) : problem);
  }
  let chosen = [...choice.defaults];
  if (events !== undefined) {
    const known = new Set<string>(choice.known);
    if (
      !Array.isArray(events) ||
      events.length === 0 ||
      events.some((type) => typeof type !== 'string' || !known.has(type)) ||
      new Set(events).size !== events.length
    )
      issues.push(
        issue(
          'webhook.events',
          `Expected distinct event types, at least one, of: ${choice.known.join(', ')}.`,
        ),
      );
    else chosen = events as string[];
  }
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, webhook: { url: url as string, events: chosen as GenerationWebhook['events'] } };
}

/** Why the URL would not be delivered to (an issue of its own when its name could not be resolved now); null when it would. */
async function urlProblem(value: string, rules: WebhookCheckRules): Promise<string | ValidationIssue | null> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'Not a URL.';
  }
  const { schemes, policy } = webhookTarget(url, rules);
  const loopbackOnly =
    'Plain http is delivered to loopback only (development); other hosts need an https URL.';
  try {
    checkUrl(url, schemes, policy);
  } catch (error) {
    if (error instanceof OutboundFetchError)
      return error.code === 'forbidden_address' && schemes.includes('http:')
        ? loopbackOnly
        : `${error.message}.`;
    throw error;
  }
  const resolver = rules.resolver ?? defaultWebhookResolver();
  const found = await resolver.lookup(url.hostname).then(
    (addresses) => ({ addresses }),
    (error: NodeJS.ErrnoException) => ({ addresses: [], code: error.code }),
  );
  if ('code' in found && found.code === 'ETIMEOUT')
    return issue(
      'webhook.url',
      'Its host name did not resolve in time (its name servers did not answer).',
      dnsUnavailableCode,
    );
  // The resolver says ENOTFOUND of a name with no address (NXDOMAIN, no record): anything else is
  // a name server that failed (SERVFAIL, refused, unreachable).
  if ('code' in found && found.code !== 'ENOTFOUND')
    return issue(
      'webhook.url',
      `Its host name could not be resolved now (its name servers failed: ${found.code ?? 'unknown'}).`,
      dnsUnavailableCode,
    );
  if (found.addresses.length === 0) return 'Its host name does not resolve.';
  if (found.addresses.some(({ address }) => !policy.check(address).allowed))
    return schemes.includes('http:')
      ? loopbackOnly
      : 'Its host is not at a public address; deliveries go to public HTTPS URLs only.';
  return null;
}

/** A string's length in Unicode code points, as JSON Schema's maxLength counts it (the OpenAPI document's). */
function codePoints(text: string): number {
  if (text.length > 8192) return text.length; // more than 2048 whatever it holds: not walked
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}
