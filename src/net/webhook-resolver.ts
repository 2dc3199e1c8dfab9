import { promises as dns, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import type { Resolve } from './pinned-connection.js';

/**
 * How the host names of customers' webhook URLs are resolved, at admission (the API, also for the
 * free quote) and at each delivery (the worker). Not by dns.lookup: that is the system's
 * getaddrinfo on libuv's thread pool of 4, with no time limit, so a few names under a name server
 * that drops queries would hold the threads that file writes, image processing and provider look-ups
 * wait for. Here names are asked of DNS directly (c-ares, on the event loop: no thread is held),
 * with a time limit per name and a cap on the names resolved at once (more wait their turn, within
 * their time limit).
 *
 * What it answers: an IP literal is itself; `localhost` and names under `.localhost` are loopback
 * (127.0.0.1 and ::1, RFC 6761), without asking; any other name is looked up in DNS only, at the
 * name servers given (default: the system's, from /etc/resolv.conf). /etc/hosts is not read: a name
 * only a host file knows is an internal name, not a customer's public receiver.
 */
export interface WebhookResolverOptions {
  /** Name servers (`1.1.1.1`, `127.0.0.1:5353`, `[::1]:53`); absent or empty: the system's. */
  servers?: readonly string[];
  /** The time limit for one name, its wait for a turn included. */
  timeoutMs: number;
  /** Names resolved at once; more wait their turn. */
  maxInFlight: number;
}

const loopback: LookupAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/** Failures that say the name has no address, as opposed to a name server that did not answer well. */
const noAddress = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN']);

export class WebhookResolver {
  private inFlight = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly options: WebhookResolverOptions) {}

  /** The name's addresses (`family` 4 or 6: that family only); rejects with a `code` as dns.lookup does. */
  async lookup(hostname: string, family: 0 | 4 | 6 = 0): Promise<LookupAddress[]> {
    const name = hostname
      .replace(/^\[|\]$/g, '')
      .replace(/\.$/, '')
      .toLowerCase();
    const literal = isIP(name);
    if (literal) return [{ address: name, family: literal }];
    if (name === 'localhost' || name.endsWith('.localhost'))
      return loopback.filter((a) => family === 0 || a.family === family);
    const deadline = Date.now() + this.options.timeoutMs;
    await this.turn(name, deadline);
    try {
      return await this.ask(name, family, deadline);
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
  }

  /** The same, as the `lookup` a socket (pinned-connection.ts) is given. */
  readonly resolve: Resolve = (hostname, options, callback) => {
    const family =
      options.family === 4 || options.family === 'IPv4'
        ? 4
        : options.family === 6 || options.family === 'IPv6'
          ? 6
          : 0;
    this.lookup(hostname, family).then(
      (addresses) => callback(null, addresses),
      (error: NodeJS.ErrnoException) => callback(error, []),
    );
  };

  /** Waits for a slot among `maxInFlight` (taken when it resolves), or rejects at the deadline. */
  private turn(name: string, deadline: number): Promise<void> {
    if (this.inFlight < this.options.maxInFlight) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const go = () => {
        clearTimeout(timer);
        this.inFlight++;
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(go), 1);
        reject(timedOut(name, this.options.timeoutMs));
      }, deadline - Date.now());
      this.waiting.push(go);
    });
  }

  /** A and AAAA at once on a channel of this name's own, cancelled at the deadline. */
  private async ask(name: string, family: 0 | 4 | 6, deadline: number): Promise<LookupAddress[]> {
    const left = Math.max(1, deadline - Date.now());
    // c-ares tries each server twice, the second time with twice the wait: about the time left in all.
    const resolver = new dns.Resolver({ timeout: Math.max(50, Math.floor(left / 3)), tries: 2 });
    if (this.options.servers?.length) resolver.setServers([...this.options.servers]);
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      resolver.cancel();
    }, left);
    try {
      const [v4, v6] = await Promise.allSettled([
        family === 6 ? [] : resolver.resolve4(name),
        family === 4 ? [] : resolver.resolve6(name),
      ]);
      const addresses: LookupAddress[] = [
        ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
        ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
      ];
      if (addresses.length > 0) return addresses;
      const failures = [v4, v6].flatMap((r) =>
        r.status === 'rejected' ? [r.reason as NodeJS.ErrnoException] : [],
      );
      if (late || failures.some((f) => f.code === 'ETIMEOUT' || f.code === 'ECANCELLED'))
        throw timedOut(name, this.options.timeoutMs);
      const failure = failures.find((f) => !noAddress.has(f.code ?? ''));
      if (failure) throw failure;
      throw Object.assign(new Error(`${name} has no address`), { code: 'ENOTFOUND', hostname: name });
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A name whose name servers did not answer within the time limit (`ETIMEOUT`, as c-ares says it). */
function timedOut(name: string, timeoutMs: number): NodeJS.ErrnoException {
  return Object.assign(new Error(`${name}: its name servers did not answer within ${timeoutMs} ms`), {
    code: 'ETIMEOUT',
    hostname: name,
  });
}

/** Whether a name server as WEBHOOK_DNS_SERVERS takes it (an address, with a port or not). */
export function isValidNameServer(value: string): boolean {
  try {
    new dns.Resolver().setServers([value]);
    return true;
  } catch {
    return false;
  }
}

let shared: WebhookResolver | undefined;

/** The resolver used where none is given: the system's name servers, 3 s a name, 64 at once. */
export function defaultWebhookResolver(): WebhookResolver {
  shared ??= new WebhookResolver({ timeoutMs: 3_000, maxInFlight: 64 });
  return shared;
}
