import { rootCertificates } from 'node:tls';
import { classify } from './outbound-fetch-error.js';
import { checkUrl } from './outbound-fetch.js';
import { pinnedRequest, type Resolve } from './pinned-connection.js';
import { defaultWebhookResolver } from './webhook-resolver.js';
import { webhookTarget, type WebhookTargetRules } from './webhook-target.js';

/**
 * One POST to a URL someone else gave us (a webhook receiver), under the outbound rules of
 * outbound-fetch.ts with the webhooks' own allowances (webhook-target.ts): HTTPS only, no
 * credentials, every address it resolves to allowed, checked at the connection itself; the name
 * resolved by the webhook resolver (time-limited, off the thread pool). Redirects are not followed
 * (a receiver that moved answers 3xx, which is not a delivery). Resolves with the status once the answer's head has come (the body is drained,
 * at most 64 KiB, then dropped); rejects with an OutboundFetchError (refused address, timeout,
 * connection failure).
 */
export async function outboundPost(
  input: string,
  request: { body: Buffer; headers: Record<string, string> },
  options: Partial<WebhookTargetRules> & {
    timeoutMs: number;
    extraCa?: readonly string[];
    /**
     * The resolver (default: defaultWebhookResolver's): its answer is checked at this delivery,
     * whatever it was at admission.
     */
    resolve?: Resolve;
  },
): Promise<number> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const url = new URL(input);
  const { schemes, policy } = webhookTarget(url, {
    allowCidrs: options.allowCidrs ?? [],
    allowLoopbackHttp: options.allowLoopbackHttp ?? false,
  });
  checkUrl(url, schemes, policy);
  const ca = options.extraCa?.length ? [...rootCertificates, ...options.extraCa] : undefined;
  try {
    const response = await pinnedRequest(url, {
      policy,
      signal: deadline,
      ca,
      method: 'POST',
      headers: { ...request.headers, 'content-length': String(request.body.length) },
      body: request.body,
      resolve: options.resolve ?? defaultWebhookResolver().resolve,
    });
    let read = 0;
    try {
      for await (const chunk of response as AsyncIterable<Buffer>) {
        read += chunk.length;
        if (read > 64 * 1024) break;
      }
    } finally {
      response.destroy();
    }
    return response.statusCode ?? 0;
  } catch (error) {
    throw classify(error, url, deadline);
  }
}
