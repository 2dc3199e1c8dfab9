import { batchEventTypes } from '../../db/batch-events.js';
import type { ValidationIssue } from '../../vocabulary/errors.js';
import {
  checkWebhook,
  type WebhookCheckRules,
  type WebhookEventChoice,
} from '../admission/webhook-request.js';

/*
 * What a batch is asked for beside its lines: its completion window, metadata and webhook, and the
 * check of each line's own field, `custom_id`.
 */

/** A batch's subscription (POST /v1/batches `webhook`): its event types; by default the end events. */
export const batchWebhookEvents: WebhookEventChoice = {
  known: batchEventTypes,
  defaults: ['batch.completed', 'batch.canceled', 'batch.expired'],
};

/**
 * The batch's `webhook`, checked as a generation's is (the same outbound rules, the same shape),
 * over the batch's event types.
 */
export function checkBatchWebhook(value: unknown, rules: WebhookCheckRules | undefined) {
  return checkWebhook(value, rules ?? { allowCidrs: [] }, batchWebhookEvents);
}

/**
 * The envelope (checkEnvelope) and its webhook (checkBatchWebhook) together: every issue of both,
 * or both values.
 */
export async function checkBatchEnvelope(
  body: Record<string, unknown>,
  rules: WebhookCheckRules | undefined,
): Promise<
  | { ok: true; envelope: BatchEnvelope; webhook: { url: string; events: string[] } | null }
  | { ok: false; issues: ValidationIssue[] }
> {
  const envelope = checkEnvelope(body);
  const hook = await checkBatchWebhook(body.webhook, rules);
  if (!envelope.ok || !hook.ok)
    return { ok: false, issues: [...(envelope.ok ? [] : envelope.issues), ...(hook.ok ? [] : hook.issues)] };
  const webhook = hook.webhook && { url: hook.webhook.url, events: hook.webhook.events };
  return { ok: true, envelope: envelope.envelope, webhook };
}

/** A completion window: a whole number of seconds, minutes, hours or days, from 1 s to 7 days. */
const windowPattern = /^([1-9][0-9]{0,6})(s|m|h|d)$/;
const unitMs = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const longestWindowMs = 7 * unitMs.d;

/** The window's length in ms, or null when it is not one this API takes. */
export function completionWindowMs(value: string): number | null {
  const match = windowPattern.exec(value);
  if (!match) return null;
  const ms = Number(match[1]) * unitMs[match[2] as keyof typeof unitMs];
  return ms <= longestWindowMs ? ms : null;
}

export interface BatchEnvelope {
  completionWindow: string;
  windowMs: number;
  metadata: Record<string, string> | null;
}

/** `completion_window` (default 24h) and `metadata` (up to 16 string values), each issue named. */
export function checkEnvelope(
  body: Record<string, unknown>,
): { ok: true; envelope: BatchEnvelope } | { ok: false; issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = Object.keys(body)
    // `webhook` is checked by checkBatchWebhook (its URL is resolved: asynchronous).
    .filter((key) => !['completion_window', 'metadata', 'webhook'].includes(key))
    .map((key) => ({ field: key, code: 'unrecognized_keys', message: 'Unknown field.' }));
  const window = body.completion_window ?? '24h';
  const windowMs = typeof window === 'string' ? completionWindowMs(window) : null;
  if (windowMs === null)
    issues.push({
      field: 'completion_window',
      code: 'invalid_value',
      message: 'Expected a duration such as 24h, 90m or 3600s, at most 7d.',
    });
  const { metadata } = body;
  const metadataOk =
    metadata === undefined ||
    metadata === null ||
    (typeof metadata === 'object' &&
      !Array.isArray(metadata) &&
      Object.keys(metadata).length <= 16 &&
      Object.entries(metadata).every(([k, v]) => k.length <= 64 && typeof v === 'string' && v.length <= 512));
  if (!metadataOk)
    issues.push({
      field: 'metadata',
      code: 'invalid_type',
      message: 'Expected an object of at most 16 string values (keys up to 64, values up to 512 characters).',
    });
  if (issues.length > 0) return { ok: false, issues };
  return {
    ok: true,
    envelope: {
      completionWindow: window as string,
      windowMs: windowMs!,
      metadata: (metadata as Record<string, string> | undefined) ?? null,
    },
  };
}

/** `custom_id`: 1 to 64 printable ASCII characters. */
const customIdPattern = /^[\x20-\x7e]{1,64}$/;

export function customIdIssue(value: unknown): ValidationIssue | null {
  if (typeof value === 'string' && customIdPattern.test(value)) return null;
  return {
    field: 'custom_id',
    code: value === undefined ? 'required' : 'invalid_value',
    message: 'Each line needs a custom_id: 1 to 64 printable ASCII characters, unique in the batch.',
  };
}
