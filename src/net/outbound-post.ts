import { rootCertificates } from 'node:tls';
import { AddressPolicy } from './address-policy.js';
import { classify } from './outbound-fetch-error.js';
import { checkUrl } from './outbound-fetch.js';
import { pinnedRequest, type Resolve } from './pinned-connection.js';

/**
 * One POST to a URL someone else gave us (a webhook receiver), under the outbound rules of
 * outbound-fetch.ts: HTTPS only, no credentials, every address it resolves to allowed, checked at
 * the connection itself. Redirects are not followed (a receiver that moved answers 3xx, which is
 * not a delivery). Resolves with the status once the answer's head has come (the body is drained,
 * at most 64 KiB, then dropped); rejects with an OutboundFetchError (refused address, timeout,
 * connection failure).
 */
export async function outboundPost(
  input: string,
  request: { body: Buffer; headers: Record<string, string> },
  options: {
    timeoutMs: number;
    allowCidrs?: readonly string[];
    extraCa?: readonly string[];
    /** The resolver (default dns.lookup): its answer is checked at this delivery, whatever it was at admission. */
    resolve?: Resolve;
  },
): Promise<number> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const policy = new AddressPolicy(options.allowCidrs ?? []);
  const url = new URL(input);
  checkUrl(url, ['https:'], policy);
  const ca = options.extraCa?.length ? [...rootCertificates, ...options.extraCa] : undefined;
  try {
    const response = await pinnedRequest(url, {
      policy,
      signal: deadline,
      ca,
      method: 'POST',
      headers: { ...request.headers, 'content-length': String(request.body.length) },
      body: request.body,
      ...(options.resolve ? { resolve: options.resolve } : {}),
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
