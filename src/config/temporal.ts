import { z } from 'zod';
import { ConfigError, pem, requiredError, secret, settingGroup } from './setting.js';

/** Where Temporal is, and which queue our workflows run on. */
export const temporalSettings = settingGroup({
  title: 'Temporal',
  shape: {
    TEMPORAL_ADDRESS: z
      .string({ error: requiredError('is required (host:port of the Temporal frontend)') })
      .min(1),
    TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
    TEMPORAL_TASK_QUEUE: z.string().min(1).default('generations'),
  },
  docs: {
    TEMPORAL_ADDRESS: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: '`host:port` of the Temporal frontend. Required by `api`, `worker` and `result-host`. Unset, `npm start` runs the Temporal dev server, and `admin` uses the one of the `npm start` running in this folder.',
      default: '(required)',
    },
    TEMPORAL_NAMESPACE: { readBy: ['api', 'worker', 'admin', 'start'], text: 'The Temporal namespace.' },
    TEMPORAL_TASK_QUEUE: {
      readBy: ['api', 'worker', 'admin'],
      text: 'Workflows and short steps run on this queue; reads of provider jobs (an OpenAI call among them) `<queue>.provider-waits`, batches (their workflows and slices) `<queue>.batches`, webhook deliveries `<queue>.webhooks`, thumbnails `<queue>.thumbnails`.',
    },
  },
});

/**
 * How every connection to Temporal (API, worker, admin CLI, launcher) is secured. TLS is on when any
 * of these is set (an API key too: Temporal Cloud takes keys over TLS only), unless TEMPORAL_TLS=false.
 */
export const temporalSecuritySettings = settingGroup({
  title: 'Temporal over TLS, mTLS and API keys',
  shape: {
    TEMPORAL_TLS: z.enum(['true', 'false']).optional(),
    TEMPORAL_TLS_CERT: pem,
    TEMPORAL_TLS_KEY: pem,
    TEMPORAL_TLS_CA: pem,
    TEMPORAL_TLS_SERVER_NAME: z.string().trim().min(1).optional(),
    TEMPORAL_API_KEY: secret,
  },
  docs: {
    TEMPORAL_TLS: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: '`true`: TLS with the system’s CAs and nothing else set; `false`: plaintext even with an API key (only for a trusted local proxy). Unset: TLS as soon as any variable below is set.',
    },
    TEMPORAL_TLS_CERT: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: 'mTLS: this process’s client certificate, PEM text or a PEM file’s path (both or neither with the key).',
    },
    TEMPORAL_TLS_KEY: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: 'mTLS: its private key, PEM text or a PEM file’s path.',
    },
    TEMPORAL_TLS_CA: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: 'The CA that signed the frontend’s certificate, when the system does not trust it.',
    },
    TEMPORAL_TLS_SERVER_NAME: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: 'The name the frontend’s certificate carries, when it differs from `TEMPORAL_ADDRESS`’s host.',
    },
    TEMPORAL_API_KEY: {
      readBy: ['api', 'worker', 'admin', 'start'],
      text: 'Sent as `Authorization: Bearer …` on every call (Temporal Cloud API keys); never logged.',
    },
  },
});

export type TemporalSecurity = z.output<z.ZodObject<typeof temporalSecuritySettings.shape>>;

/** Refuses half a client pair, and TLS settings with TEMPORAL_TLS=false. */
export function checkTemporalSecurity<T extends TemporalSecurity>(c: T): T {
  const problems: string[] = [];
  if ((c.TEMPORAL_TLS_CERT === undefined) !== (c.TEMPORAL_TLS_KEY === undefined))
    problems.push(
      `${c.TEMPORAL_TLS_CERT ? 'TEMPORAL_TLS_KEY' : 'TEMPORAL_TLS_CERT'}: mTLS needs the client certificate and its key, both`,
    );
  const tlsSettings = [
    c.TEMPORAL_TLS_CERT && 'TEMPORAL_TLS_CERT',
    c.TEMPORAL_TLS_CA && 'TEMPORAL_TLS_CA',
    c.TEMPORAL_TLS_SERVER_NAME && 'TEMPORAL_TLS_SERVER_NAME',
  ].filter(Boolean);
  if (c.TEMPORAL_TLS === 'false' && tlsSettings.length > 0)
    problems.push(
      `TEMPORAL_TLS: false, yet ${tlsSettings.join(', ')} ${tlsSettings.length === 1 ? 'is' : 'are'} set`,
    );
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  return c;
}
