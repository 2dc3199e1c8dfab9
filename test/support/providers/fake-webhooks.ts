import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { newWebhookSecret, signWebhook } from '../../../src/net/webhook-signing.js';
import { waitFor } from '../wait.js';

/**
 * The webhooks the fake providers push when a job that carried a webhook URL ends: signed as each
 * provider signs them, POSTed, retried on a non-2xx answer (or none) a few times, every attempt
 * recorded. Tests steer the next deliveries: lose them, duplicate them, send them late, forge
 * their signature, or replay them (a timestamp from the past, signed as it was then).
 */

/** How a delivery went out. */
export type DeliveryKind = 'genuine' | 'duplicate' | 'forged' | 'replayed' | 'redelivered';

/** One POST the fake made, and what the receiver answered. */
export interface WebhookAttempt {
  url: string;
  /** The provider's job the delivery is about (Replicate's prediction id, fal's request id). */
  jobId: string;
  kind: DeliveryKind;
  body: string;
  headers: Record<string, string>;
  /** The receiver's status; null when it could not be reached. */
  status: number | null;
  /** The receiver's answer, as text. */
  answer: string;
}

/** Signs one delivery's body; `timestamp` in seconds, `messageId` the same on each retry of one delivery. */
export type Signer = (delivery: {
  jobId: string;
  body: string;
  messageId: string;
  timestamp: number;
  forged: boolean;
}) => Record<string, string>;

interface Delivery {
  url: string;
  jobId: string;
  body: string;
}

export class WebhookSender {
  /** Every POST made, in order. */
  readonly attempts: WebhookAttempt[] = [];
  /** Deliveries `lose` dropped: never sent. */
  readonly lost: Array<{ url: string; jobId: string }> = [];
  /** Attempts after the first when the receiver answers non-2xx or cannot be reached. */
  retries = 3;
  retryDelayMs = 100;
  private counts = { lose: 0, duplicate: 0, forge: 0, replay: 0, late: 0 };
  private replayAgeSeconds = 600;
  private lateMs: number | undefined;
  private held: Array<() => void> = [];
  private readonly last = new Map<string, Delivery>();
  private readonly ended = new Set<string>();
  private readonly pending = new Set<Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly signer: Signer) {}

  /** The next `n` deliveries are lost: never sent. */
  lose(n = 1): void {
    this.counts.lose += n;
  }
  /** The next `n` deliveries are sent twice, the second once the first is answered (the same headers). */
  duplicate(n = 1): void {
    this.counts.duplicate += n;
  }
  /** The next `n` deliveries are signed with a key that is not the provider's (sent once, never retried). */
  forge(n = 1): void {
    this.counts.forge += n;
  }
  /** The next `n` deliveries carry a timestamp `ageSeconds` old, signed as then (sent once, never retried). */
  replay(n = 1, ageSeconds = 600): void {
    this.counts.replay += n;
    this.replayAgeSeconds = ageSeconds;
  }
  /** The next `n` deliveries are held: sent after `ms`, or, without it, at `sendLate()`. */
  late(n = 1, ms?: number): void {
    this.counts.late += n;
    this.lateMs = ms;
  }
  /** Sends the deliveries `late` holds. */
  sendLate(): void {
    for (const send of this.held.splice(0)) send();
  }
  /** Sends the end of `jobId` again, freshly signed (a provider's own redelivery); false if it never ended with a webhook. */
  redeliver(jobId: string): boolean {
    const delivery = this.last.get(jobId);
    if (delivery) this.track(this.post(delivery, 'redelivered', { retry: true }));
    return delivery !== undefined;
  }
  /**
   * Resolves once the ends of `jobIds` have come to the sender (jobs that end on their clocks: later
   * on a loaded machine) and every delivery under way is done, as `settled`.
   */
  async settledAfter(...jobIds: string[]): Promise<void> {
    await waitFor(() => Promise.resolve(jobIds.every((id) => this.ended.has(id))));
    await this.settled();
  }
  /** The attempts about `jobId`. */
  attemptsFor(jobId: string): WebhookAttempt[] {
    return this.attempts.filter((a) => a.jobId === jobId);
  }
  /** Resolves once every delivery under way (retries included; held ones excepted) is done. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /**
   * A job ended: its delivery goes out as the controls say (counted under way, for `settled`, from
   * this call on, while its body is still being made).
   */
  deliver(url: string, jobId: string, body: string | Promise<string>): void {
    if (this.closed) return;
    this.ended.add(jobId);
    if (typeof body !== 'string') return this.track(body.then((text) => this.deliver(url, jobId, text)));
    const delivery = { url, jobId, body };
    this.last.set(jobId, delivery);
    if (this.take('lose')) {
      this.lost.push({ url, jobId });
      return;
    }
    const kind: DeliveryKind = this.take('forge') ? 'forged' : this.take('replay') ? 'replayed' : 'genuine';
    const twice = this.take('duplicate');
    const send = () =>
      this.track(
        (async () => {
          const headers = await this.post(delivery, kind, { retry: kind === 'genuine' });
          if (twice && headers) await this.attempt(delivery, 'duplicate', headers);
        })(),
      );
    if (!this.take('late')) return send();
    if (this.lateMs === undefined) return void this.held.push(send);
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      send();
    }, this.lateMs);
    this.timers.add(timer);
  }

  /** Signs `body` as the provider would for `jobId` now (a test's own delivery). */
  sign(jobId: string, body: string, options: { timestamp?: number; forged?: boolean } = {}) {
    return this.signer({
      jobId,
      body,
      messageId: `msg_${randomBytes(12).toString('hex')}`,
      timestamp: options.timestamp ?? Math.floor(Date.now() / 1000),
      forged: options.forged ?? false,
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.held = [];
    await this.settled();
  }

  private take(control: keyof WebhookSender['counts']): boolean {
    if (this.counts[control] === 0) return false;
    this.counts[control]--;
    return true;
  }

  private track(work: Promise<unknown>): void {
    const done = work.then(
      () => undefined,
      () => undefined,
    );
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }

  /** Sends one delivery (retried if `retry`); the headers of its last attempt. */
  private async post(
    delivery: Delivery,
    kind: DeliveryKind,
    { retry }: { retry: boolean },
  ): Promise<Record<string, string> | undefined> {
    const messageId = `msg_${randomBytes(12).toString('hex')}`;
    let headers: Record<string, string> | undefined;
    for (let attempt = 0; attempt <= (retry ? this.retries : 0) && !this.closed; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, this.retryDelayMs));
      const now = Math.floor(Date.now() / 1000);
      headers = this.signer({
        jobId: delivery.jobId,
        body: delivery.body,
        messageId,
        timestamp: kind === 'replayed' ? now - this.replayAgeSeconds : now,
        forged: kind === 'forged',
      });
      const status = await this.attempt(delivery, kind, headers);
      if (status !== null && status >= 200 && status < 300) break;
    }
    return headers;
  }

  private async attempt(
    delivery: Delivery,
    kind: DeliveryKind,
    headers: Record<string, string>,
  ): Promise<number | null> {
    const record: WebhookAttempt = { ...delivery, kind, headers, status: null, answer: '' };
    this.attempts.push(record);
    try {
      const response = await fetch(delivery.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: delivery.body,
        signal: AbortSignal.timeout(5_000),
      });
      record.answer = await response.text();
      record.status = response.status;
    } catch (error) {
      record.answer = String(error);
    }
    return record.status;
  }
}

/** Replicate's signing: Standard Webhooks with the account's secret (`whsec_…`). */
export class ReplicateSigning {
  secret = newWebhookSecret();

  /** A new secret: deliveries are signed with it from now on (GET …/webhooks/default/secret gives it). */
  rotate(): void {
    this.secret = newWebhookSecret();
  }

  readonly signer: Signer = ({ body, messageId, timestamp, forged }) => ({
    ...signWebhook({ id: messageId, timestamp, body }, [forged ? newWebhookSecret() : this.secret]),
  });
}

/**
 * fal's signing: ED25519 over `request_id\nuser_id\ntimestamp\nsha256hex(body)`, hex in
 * X-Fal-Webhook-Signature; the public keys in a JWKS (`jwks()`, served by the fake).
 */
export class FalSigning {
  readonly userId = 'fal-user-test';
  private keys: Array<{ kid: string; privateKey: KeyObject; publicKey: KeyObject }> = [];

  constructor() {
    this.rotate();
  }

  /** Signs with a new key from now on; `keepOld`: the JWKS still lists the earlier keys. */
  rotate(keepOld = true): void {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const key = { kid: randomBytes(8).toString('hex'), privateKey, publicKey };
    this.keys = keepOld ? [key, ...this.keys] : [key];
  }

  jwks(): { keys: Array<Record<string, string>> } {
    return {
      keys: this.keys.map(({ kid, publicKey }) => ({
        ...(publicKey.export({ format: 'jwk' }) as Record<string, string>),
        kid,
        use: 'sig',
        alg: 'EdDSA',
      })),
    };
  }

  readonly signer: Signer = ({ jobId, body, timestamp, forged }) => {
    const message = `${jobId}\n${this.userId}\n${timestamp}\n${createHash('sha256').update(body).digest('hex')}`;
    const key = forged ? generateKeyPairSync('ed25519').privateKey : this.keys[0]!.privateKey;
    return {
      'x-fal-webhook-request-id': jobId,
      'x-fal-webhook-user-id': this.userId,
      'x-fal-webhook-timestamp': String(timestamp),
      'x-fal-webhook-signature': sign(null, Buffer.from(message), key).toString('hex'),
    };
  };
}
