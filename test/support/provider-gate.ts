import { seededRandom } from './seeded-random.js';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

/**
 * What a gate in front of a provider stand-in does with new connections:
 * - `open`: relays them whole;
 * - `refuse`: nothing listens on the port (connection refused), and the connections it held are cut,
 *   as when a provider's front goes away;
 * - `cut`: relays them, but resets `cutRate` of them part-way (mid-request or mid-answer).
 */
export type GateMode = 'open' | 'refuse' | 'cut';

export interface ProviderGate {
  /** `http://127.0.0.1:PORT`: the address clients are given for the provider. */
  origin: string;
  mode(): GateMode;
  set(mode: GateMode): Promise<void>;
  cuts: { request: number; answer: number };
  close(): Promise<void>;
}

/**
 * A relay on a fixed loopback port in front of an in-process stand-in (`target`), whose faults a
 * fault run switches while traffic flows. The port is kept across `refuse`, so clients holding the
 * provider's address (and the URLs its answers named) reach it again once it is open.
 */
export async function startProviderGate(
  target: { host: string; port: number },
  options: { cutRate: number; seed: number },
): Promise<ProviderGate> {
  const next = seededRandom(options.seed);
  const cuts = { request: 0, answer: 0 };
  let mode: GateMode = 'open';
  const listen = (port = 0) =>
    startTcpRelay(target, port, {
      cut: () => {
        if (mode !== 'cut' || next() >= options.cutRate) return undefined;
        // Within the first request or answer or two (small JSON, headers included), or a file's first KBs.
        return { direction: next() < 0.5 ? 'request' : 'answer', afterBytes: 1 + Math.floor(next() * 1_200) };
      },
      onCut: (cut) => (cuts[cut.direction] += 1),
    });
  let relay: TcpRelay | undefined = await listen();
  const port = relay.port;
  return {
    origin: `http://127.0.0.1:${port}`,
    mode: () => mode,
    cuts,
    set: async (to) => {
      mode = to;
      if (to === 'refuse' && relay) {
        const closing = relay;
        relay = undefined;
        await closing.close();
      } else if (to !== 'refuse' && !relay) relay = await listen(port);
    },
    close: async () => {
      await relay?.close();
      relay = undefined;
    },
  };
}
