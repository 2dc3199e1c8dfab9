import { imageSize } from 'image-size';
import { ProviderUncertainError, type ProviderResult, type ProviderStatus } from '../provider.js';
import type { CallRow } from './openai-calls.js';

/** How the OpenAI adapter reads a call's record and OpenAI's answer (split from openai-images-provider.ts). */

const resultTypes: Record<string, string> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp' };

/** What a call's row says, for a call that is not to be sent now. */
export function answerFrom(call: CallRow): ProviderStatus {
  switch (call.state) {
    case 'succeeded':
      return { state: 'succeeded', results: call.results ?? [] };
    case 'failed':
      return { state: 'failed', message: call.error ?? 'OpenAI refused the request', rejected: true };
    case 'canceled':
      return { state: 'failed', message: 'The call to OpenAI was canceled before it was sent.' };
    case 'lost':
      throw new ProviderUncertainError(
        call.error ?? `the answer to OpenAI call ${call.job_id} was lost`,
        true,
      );
    case 'sent':
      throw new ProviderUncertainError(
        `OpenAI call ${call.job_id} was sent earlier and its outcome never recorded (its worker stopped mid-call?): it may have run and been billed, so it is not sent again`,
        true,
      );
    case 'pending':
      throw new Error(`OpenAI call ${call.job_id} is pending without a request`);
  }
}

/** The images of a 200 answer (`data[].b64_json`), measured; undefined when there are none or one is unreadable. */
export function decodeImages(body: unknown): Array<ProviderResult & { bytes: Buffer }> | undefined {
  const data = (body as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data) || data.length === 0) return undefined;
  const images: Array<ProviderResult & { bytes: Buffer }> = [];
  for (const item of data) {
    const b64 = (item as { b64_json?: unknown } | null)?.b64_json;
    if (typeof b64 !== 'string' || b64 === '') return undefined;
    const bytes = Buffer.from(b64, 'base64');
    let size: ReturnType<typeof imageSize>;
    try {
      size = imageSize(bytes);
    } catch {
      return undefined;
    }
    const contentType = size.type ? resultTypes[size.type] : undefined;
    if (!contentType || !size.width || !size.height) return undefined;
    images.push({ bytes, width: size.width, height: size.height, contentType });
  }
  return images;
}
