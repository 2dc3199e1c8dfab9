import { idempotencyKeyHeaderSchema, idempotencyKeyWords } from '../generations/idempotency-key.js';

/** The headers, header parameters and longer texts the OpenAPI description gives the generation operations. */

export const requestIdHeader = {
  description:
    'The generation id on generation endpoints, a request id (req_…) elsewhere; quote it to support.',
  schema: { type: 'string' },
};

const etagHeader = {
  description:
    'Strong entity tag of the body: it changes whenever anything in the body changes. Send it back in If-None-Match.',
  schema: { type: 'string' },
};
const retryAfterHeader = {
  description: 'Present while the generation is queued: seconds until the next poll is worth making (2).',
  schema: { type: 'integer' },
};
export const generationHeaders = {
  'x-request-id': requestIdHeader,
  etag: etagHeader,
  'retry-after': retryAfterHeader,
  'preference-applied': {
    description: 'With Prefer: wait=N, the wait that was applied: `wait=N` with N clamped to 1 to 60.',
    schema: { type: 'string' },
  },
};
/** GET /generations/{id}: the provider serving it (issue 29). */
export const getGenerationHeaders = {
  ...generationHeaders,
  'generation-provider': {
    description:
      'The provider serving the generation, or that served it (the body’s `provider`): fal, replicate, openai or simulated. Absent while no provider has been sent the job.',
    schema: { type: 'string' },
  },
};
/** RFC 7240 `Prefer: wait=N` on the generation's answers. */
export const preferWaitParameter = {
  name: 'Prefer',
  in: 'header',
  required: false,
  description:
    '`wait=N` (1 to 60 seconds; larger is clamped to 60): the answer comes as soon as the generation is succeeded, failed or rejected, or after N seconds with its current state. Woken by the change itself, not by polling. At most 1,000 waiting requests per API key and 10,000 per API process; past that, the preference is not honoured: the answer comes at once, without Preference-Applied (a POST: its 202, the generation started and charged).',
  schema: { type: 'string', examples: ['wait=30'] },
};

/** POST /generations: the key that makes a retry safe (its rule: src/generations/idempotency-key.ts). */
export const idempotencyKeyParameter = idempotencyKeyHeader(
  `${idempotencyKeyWords}; one per intended generation.`,
);

/** An Idempotency-Key header parameter (POST /generations, POST /batches), in its operation's words. */
export function idempotencyKeyHeader(description: string) {
  return {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description,
    schema: idempotencyKeyHeaderSchema,
  };
}

/** POST /generations: the deadline for reaching a provider (the header Replicate's users know). */
export const cancelAfterParameter = {
  name: 'Cancel-After',
  in: 'header',
  required: false,
  description:
    'A duration from the generation’s creation: whole hours, minutes and seconds (30s, 5m, 1h30m, 2h) or plain seconds; 5s to 24h. A generation not yet handed to a provider by then is canceled and refunded (failed, error.code canceled, credits_refunded true); one the provider already has runs on. Shown as the generation’s cancel_after. Part of the request: the same Idempotency-Key with another Cancel-After is a conflict. Any other value is a 400 invalid_request naming Cancel-After.',
  schema: { type: 'string', pattern: '^(\\d+|(\\d+h)?(\\d+m)?(\\d+s)?)$', examples: ['30s', '1h30m'] },
};

/** GET /generations/{id}: the conditional poll. */
export const ifNoneMatchParameter = {
  name: 'If-None-Match',
  in: 'header',
  required: false,
  description: 'An ETag of an earlier answer: 304 with no body while the generation is unchanged.',
  schema: { type: 'string' },
};

/** POST /generations/{id}/cancel. */
export const cancelDescription =
  'No Idempotency-Key needed: a cancel is idempotent. Not yet handed to the provider, or still in its queue and stopped there: the generation ends failed with error.code canceled and credits_refunded true (refunded once). A job the provider started just as the cancel reached it, and then stopped (Replicate canceled with started_at): 200, failed with error.code canceled and credits_refunded false (the provider bills what ran, so the charge stands). A provider answer that does not prove the job never ran waits for the job’s end, which decides. Running or finished at the provider, or terminal already: 409 not_cancelable with the generation, and nothing changes. A canceled generation answers 200 again.';
