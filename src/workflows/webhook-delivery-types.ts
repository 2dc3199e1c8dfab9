/** A generation's subscription as its request named it, checked, with the schedule it keeps. */
export interface WebhookSubscription {
  url: string;
  /** The event types delivered (generationEventTypes). */
  events: string[];
  /** WEBHOOK_RETRY_DELAYS_MS when the request came. */
  retryDelaysMs: number[];
}

/** The start of a generation's webhook delivery workflow (`webhooks-<generationId>`). */
export interface WebhookDeliveryStart {
  generationId: string;
  /**
   * The subscription to record first (the run started by the generation's workflow); absent in a
   * run continued as new, or started for a redelivery (it is recorded already).
   */
  subscription?: { url: string; events: string[] };
  /**
   * The waits before each retry of one delivery, in ms (the first attempt is immediate); the
   * spec's schedule by default (WEBHOOK_RETRY_DELAYS_MS), shortened in tests. Each is jittered.
   */
  retryDelaysMs: number[];
  /** The last event handled (delivered, given up on, or not subscribed): a continued run's start. */
  afterSeq?: number;
  /** Events asked to be delivered again (redeliverWebhookSignal) and not yet attempted. */
  redeliveries?: number[];
}

export const webhookDeliveryWorkflowId = (generationId: string): string => `webhooks-${generationId}`;

/**
 * The signal that tells a delivery workflow to look again (webhookNudgeSignal): its generation
 * logged an event (sent by the generation's workflow after each step that may log one), or a
 * turn of its account's deliveries was given back (sent by the attempt that held it).
 */
export const webhookNudgeSignalName = 'webhookNudge';

/** The message id of one delivery: the same on every attempt and redelivery, so a receiver dedupes on it. */
export const webhookMessageId = (generationId: string, seq: number): string => `msg_${generationId}_${seq}`;
