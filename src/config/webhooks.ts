import { z } from 'zod';
import { isValidNameServer, WebhookResolver } from '../net/webhook-resolver.js';
import { addressRanges, inOrder, int, settingGroup } from './setting.js';

/**
 * Where customers' webhooks may be delivered, and how their host names are resolved: apart from the
 * service's own fetches (OUTBOUND_ALLOW_CIDRS), since a webhook URL is any customer's choice.
 */
export const webhookSettings = settingGroup({
  title: 'Webhook receivers',
  shape: {
    WEBHOOK_ALLOW_CIDRS: addressRanges(),
    WEBHOOK_ALLOW_LOOPBACK_HTTP: inOrder(['true', 'false', '1', '0', ''])
      .default('false')
      .transform((value) => value === 'true' || value === '1'),
    WEBHOOK_DNS_SERVERS: z
      .string()
      .default('')
      .transform((value) => value.split(/[\s,]+/).filter(Boolean))
      .refine((servers) => servers.every(isValidNameServer), {
        message:
          'must be comma-separated name server addresses, with a port or not: 1.1.1.1,[2606:4700::1111]:53',
      }),
    WEBHOOK_DNS_TIMEOUT_MS: int(3_000, 100),
    WEBHOOK_DNS_MAX_IN_FLIGHT: int(64, 1),
  },
  docs: {
    WEBHOOK_ALLOW_CIDRS: {
      readBy: ['api', 'worker'],
      text: 'Non-public ranges (CIDRs or addresses, comma-separated) a customer’s webhook URL may be at, checked at the request and at each delivery. Every customer could then send POSTs to any port there: leave it empty in production. `OUTBOUND_ALLOW_CIDRS` does not apply to webhooks. Cloud metadata endpoints stay refused.',
      default: '(none)',
    },
    WEBHOOK_ALLOW_LOOPBACK_HTTP: {
      readBy: ['api', 'worker'],
      text: 'Development: webhook URLs on loopback (`localhost`, 127.0.0.0/8, ::1) are taken, over plain `http://` too (other hosts still need public HTTPS). `npm start` sets it to `true`; production leaves it `false`.',
    },
    WEBHOOK_DNS_SERVERS: {
      readBy: ['api', 'worker'],
      text: 'The name servers webhook host names are asked of (comma-separated, a port optional). Webhook names are resolved in DNS only, not by the system resolver: `/etc/hosts` is not read (`localhost` is loopback).',
      default: '(the system’s, from /etc/resolv.conf)',
    },
    WEBHOOK_DNS_TIMEOUT_MS: {
      readBy: ['api', 'worker'],
      text: 'The time limit for resolving one webhook host name, a wait for a turn included: past it the request is a `400` (the URL’s name did not resolve in time) and a delivery attempt fails (retried on the schedule).',
    },
    WEBHOOK_DNS_MAX_IN_FLIGHT: {
      readBy: ['api', 'worker'],
      text: 'Webhook host names resolved at once, per process; more wait their turn within their time limit.',
    },
  },
});

type WebhookConfig = z.output<z.ZodObject<typeof webhookSettings.shape>>;

/** The process's one webhook resolver (its cap on names resolved at once is the process's). */
export function webhookResolverOf(config: WebhookConfig): WebhookResolver {
  return new WebhookResolver({
    servers: config.WEBHOOK_DNS_SERVERS,
    timeoutMs: config.WEBHOOK_DNS_TIMEOUT_MS,
    maxInFlight: config.WEBHOOK_DNS_MAX_IN_FLIGHT,
  });
}
