/** The start of a generation's webhook delivery workflow (`webhooks-<generationId>`). */
export interface WebhookDeliveryStart {
  generationId: string;
  /**
   * The waits before each retry of one delivery, in ms (the first attempt is immediate); the
   * spec's schedule by default (WEBHOOK_RETRY_DELAYS_MS), shortened in tests. Each is jittered.
   */
  retryDelaysMs: number[];
  /** The last event handled (delivered, given up on, or not subscribed): a continued run's start. */
  afterSeq?: number;
}

/** The subscribed events after a point, as nextWebhookEvents finds them. */
export interface WebhookEvents {
  /** Subscribed events after the point asked about, oldest first. */
  events: { seq: number; type: string }[];
  /** Every event up to this one is in `events` or not subscribed to (the next look starts after it). */
  throughSeq: number;
  /**
   * Nothing more will be delivered once `events` are: the subscription is gone (410) or missing,
   * or the generation has ended and no subscribed event can follow (content_expired follows a success).
   */
  finished: boolean;
  /** The generation succeeded and only its content expiring (days away) can still be delivered. */
  onlyExpiryLeft: boolean;
}

export interface WebhookAttemptOutcome {
  outcome: 'delivered' | 'failed' | 'gone';
}

export const webhookDeliveryWorkflowId = (generationId: string): string => `webhooks-${generationId}`;
