import { recordRejectedRequest } from '../../db/rejected-requests.js';
import { ValidationError, type ValidationIssue } from '../../vocabulary/errors.js';
import { newId } from '../../vocabulary/ids.js';
import type { ApiGenerationMetrics } from '../../observability/metrics.js';
import { toStorableText } from '../../validation/storable-text.js';
import type { AdmissionRequest } from './admission-request.js';
import type { RequestCheck } from './generation-request.js';
import type { CommonQueryMethods } from 'slonik';

/** The error of a request that never became a job: every issue, the uploads' first; recorded if asked. */
export async function invalidRequest(
  deps: { db: CommonQueryMethods; metrics?: ApiGenerationMetrics },
  request: AdmissionRequest,
  /** The headers' issues (Idempotency-Key, Cancel-After). */
  headerIssues: ValidationIssue[],
  checked: RequestCheck,
): Promise<ValidationError> {
  const own = request.uploads?.issues ?? [];
  const issues = [
    ...own,
    ...headerIssues,
    ...(checked.ok ? [] : checked.issues.filter((i) => !own.some((u) => u.field === i.field))),
  ];
  const what = checked.ok
    ? { model: checked.model.entry.id, mediaType: checked.model.entry.media_type }
    : checked;
  // A model the catalog does not know is not a label: the client could send any text.
  deps.metrics?.rejected(what.mediaType !== 'unknown' ? what.model : 'unknown', 'invalid_request');
  if (!request.recordInvalid) return new ValidationError(issues);
  const id = newId('gen');
  // Recorded, key not claimed: it is listed, and x-request-id names it.
  await recordRejectedRequest(deps.db, {
    id,
    accountId: request.principal.accountId,
    apiKeyId: request.principal.keyId,
    model: what.model,
    mediaType: what.mediaType,
    input: null,
    // Issues never quote what was sent; toStorableText keeps it that way should a message ever do.
    error: {
      code: 'invalid_request',
      message: toStorableText(issues.map((i) => `${i.field || 'body'}: ${i.message}`).join(' ')),
    },
  });
  return new ValidationError(issues, 'The request is invalid.', { requestId: id });
}
