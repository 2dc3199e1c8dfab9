/**
 * One fake provider in a process of its own, so that a test can pause it (SIGSTOP) as a provider
 * that stops answering without closing anything. Started by `startProviderProcess`
 * (../provider-process.ts) with the provider's name as its argument and its options in
 * PROVIDER_CHILD_OPTIONS. Clients reach it through a relay in this process that resets some
 * connections part-way; the fake names the relay's address as its own (API and result files).
 * It talks to its parent over IPC: `ready` with its env(), then answers `calm` (no more cuts) and
 * `report` (the creates it received, what it holds, the cuts made).
 */
import { startTcpRelay, type RelayCut } from '../tcp-relay.js';
import { promptContains, type FakeProvider } from './fake-http.js';
import { FalQueueServer } from './fal-queue-server.js';
import { OpenAiImagesServer } from './openai-images-server.js';
import { ReplicateServer } from './replicate-server.js';
import { seededRandom } from '../seeded-random.js';

export type ProviderChildName = 'fal' | 'replicate' | 'openai';

export interface ProviderChildOptions {
  /** Scripted outcomes (the fake's own outcome shape), each for the first job whose prompt holds the text. */
  plan: Array<{ promptContains: string; outcome: unknown }>;
  /** The share of connections the relay resets part-way (0: none). */
  cutRate: number;
  /** Seed of the cut choices, so that a run's faults can be replayed. */
  seed: number;
}

export type ProviderChildRequest = { id: number; type: 'calm' | 'report' };

export interface ProviderReport {
  /** Bodies of the create calls that reached the fake whole (answered or not). */
  creates: string[];
  /** Jobs (OpenAI: calls) the provider holds and would bill. */
  accepted: number;
  cuts: { request: number; answer: number };
}

type AnyFake = FakeProvider<unknown> & { env(): Record<string, string>; accepted(): unknown[] };

const name = process.argv[2] as ProviderChildName;
const options = JSON.parse(process.env.PROVIDER_CHILD_OPTIONS ?? '{}') as ProviderChildOptions;

/** The create calls of each provider's protocol (not polls, results or cancels). */
const isCreate: Record<ProviderChildName, (method: string, url: string) => boolean> = {
  fal: (method, url) => method === 'POST' && !url.includes('/requests/'),
  replicate: (method, url) => method === 'POST' && url.endsWith('/predictions'),
  openai: (method, url) => method === 'POST' && url.startsWith('/v1/images/'),
};

async function main(): Promise<void> {
  const fake = (name === 'fal'
    ? await FalQueueServer.start()
    : name === 'replicate'
      ? await ReplicateServer.start()
      : await OpenAiImagesServer.start()) as unknown as AnyFake;
  for (const { promptContains: text, outcome } of options.plan) fake.script(outcome, promptContains(text));

  const next = seededRandom(options.seed);
  let calm = false;
  const cuts = { request: 0, answer: 0 };
  const direct = new URL(fake.origin);
  const relay = await startTcpRelay({ host: direct.hostname, port: Number(direct.port) }, 0, {
    cut: (): RelayCut | undefined => {
      if (calm || next() >= options.cutRate) return undefined;
      // Within the first request or answer or two (small JSON, headers included), or a file's first KBs.
      return { direction: next() < 0.5 ? 'request' : 'answer', afterBytes: 1 + Math.floor(next() * 1_200) };
    },
    onCut: (cut) => (cuts[cut.direction] += 1),
  });
  // Clients (the API, the worker and result downloads) know the provider only by the relay.
  const relayOrigin = `http://127.0.0.1:${relay.port}`;
  Object.defineProperty(fake, 'origin', { get: () => relayOrigin, configurable: true });

  process.on('message', (message: ProviderChildRequest) => {
    if (message.type === 'calm') {
      calm = true;
      process.send!({ id: message.id });
      return;
    }
    const report: ProviderReport = {
      creates: fake.requests.filter((r) => isCreate[name](r.method, r.url)).map((r) => r.body),
      accepted: fake.accepted().length,
      cuts,
    };
    process.send!({ id: message.id, report });
  });
  // The parent gone (a test run killed) takes this process with it.
  process.on('disconnect', () => process.exit(0));
  process.send!({ ready: true, env: fake.env() });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
