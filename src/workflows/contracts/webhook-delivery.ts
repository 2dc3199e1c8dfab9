/* The webhook delivery workflow's activity contract (webhook-delivery-workflow.ts proxies it). */

/** A look for the events after `afterSeq`. */
export interface WebhookLook {
  generationId: string;
  afterSeq: number;
  /**
   * Also make the first attempt of each event found, in order, recording each (WebhookEvents.firstAttempts):
   * the event reaches its receiver without a round trip through Temporal after the look.
   */
  deliverFirst?: boolean;
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
  /** When its content expires (with onlyExpiryLeft; absent from older workers: looked for hourly). */
  expiresAt?: string | null;
  /**
   * The first attempts the look made itself (asked with `deliverFirst`), in order of `events`: it
   * stops at the first not delivered (`busy`, attempt 0: none made, the account's turns were taken). An event tried before (a look run again after its worker was
   * lost) is reported with its last attempt's number, not tried again. Absent from older workers
   * and in recorded histories before it: the workflow then makes every attempt itself.
   */
  firstAttempts?: { seq: number; attempt: number; outcome: WebhookAttemptOutcome['outcome'] }[];
}

export interface WebhookAttemptOutcome {
  /**
   * `busy`: not sent, and not counted as an attempt: as many of the account's deliveries were in
   * flight as it may have (WEBHOOK_DELIVERIES_PER_ACCOUNT), or older ones wait for their turn.
   */
  outcome: 'delivered' | 'failed' | 'gone' | 'busy';
}

/** One delivery attempt: a scheduled one (its number), or a redelivery asked for (numbered after the last). */
export type WebhookAttempt =
  | { generationId: string; seq: number; attempt: number; redelivery?: undefined }
  | { generationId: string; seq: number; redelivery: true };

/** The activities the delivery workflow runs, on the webhooks queue (webhookQueue), none retried by Temporal. */
export interface WebhookActivities {
  /** Records the generation's subscription (the delivery workflow's first step); a repeat keeps the first. */
  saveWebhookSubscription: (input: { generationId: string; url: string; events: string[] }) => Promise<void>;
  /** The subscribed events after `afterSeq` (one read of the log), and whether more can come. */
  nextWebhookEvents: (input: WebhookLook) => Promise<WebhookEvents>;
  /** One attempt to deliver event `seq`, in its account's turn (else `busy`, nothing sent). */
  deliverWebhook: (input: WebhookAttempt) => Promise<WebhookAttemptOutcome>;
}
