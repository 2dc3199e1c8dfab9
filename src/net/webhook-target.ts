import { AddressPolicy } from './address-policy.js';

/**
 * The rules a customer's webhook URL is held to, at the request (the API) and at each delivery
 * (the worker): public HTTPS, unless the operator allows more with settings of their own, never
 * with the ones for the service's own fetches (OUTBOUND_ALLOW_CIDRS: an internal image mirror is no
 * place for any customer's POSTs).
 */
export interface WebhookTargetRules {
  /** WEBHOOK_ALLOW_CIDRS: non-public ranges a receiver may be at (over HTTPS). */
  allowCidrs: readonly string[];
  /** WEBHOOK_ALLOW_LOOPBACK_HTTP (`npm start`): receivers on loopback, over plain http too. */
  allowLoopbackHttp?: boolean;
}

const loopback = ['127.0.0.0/8', '::1/128'];

/** The schemes a webhook URL may have and the addresses it may be at: plain http, loopback only. */
export function webhookTarget(
  url: URL,
  rules: WebhookTargetRules,
): { schemes: readonly ('https:' | 'http:')[]; policy: AddressPolicy } {
  if (rules.allowLoopbackHttp && url.protocol === 'http:')
    return { schemes: ['http:'], policy: new AddressPolicy(loopback, { only: true }) };
  return {
    schemes: ['https:'],
    policy: new AddressPolicy([...rules.allowCidrs, ...(rules.allowLoopbackHttp ? loopback : [])]),
  };
}
