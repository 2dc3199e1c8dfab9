import { defaultCatalog } from '../src/catalog/default-catalog.js';
import { buildRequestSchema } from '../src/catalog/request-schema.js';
import { listGenerationsQuerySchema } from '../src/generations/list-query.js';

/**
 * npx tsx bench/request-parse.ts — how long zod takes to parse what every request brings: a
 * POST /v1/generations body (valid and invalid) with its model's schema, and a list query. No
 * server, no I/O: the schema alone, so a zod upgrade can be compared before and after.
 *
 * Each case runs ROUNDS (default 7) rounds of ITERATIONS (default 50 000) parses after a warm-up,
 * and the median round is printed as CPU nanoseconds per parse and parses per CPU second.
 */
const rounds = Number(process.env.ROUNDS ?? 7);
const iterations = Number(process.env.ITERATIONS ?? 50_000);

const schemaOf = (id: string) => {
  const model = defaultCatalog.find((m) => m.id === id)!;
  return buildRequestSchema({ id, ...model.definition });
};
const lite = schemaOf('lumen-lite');
const pro = schemaOf('lumen-pro');
const motion = schemaOf('motion-1');

const cases: Array<[string, () => unknown]> = [
  [
    'lumen-lite body, prompt only',
    () => lite.safeParse({ model: 'lumen-lite', prompt: 'a red fox in snow' }),
  ],
  [
    'lumen-lite body, every field',
    () =>
      lite.safeParse({
        model: 'lumen-lite',
        prompt: 'a red fox in snow, '.repeat(20),
        aspect_ratio: '16:9',
        quality: 'high',
        output_format: 'jpeg',
        images: ['https://example.com/a.png', 'https://example.com/b.png'],
      }),
  ],
  [
    'lumen-pro body, unknown fields stripped',
    () => pro.safeParse({ model: 'lumen-pro', prompt: 'a red fox', resolution: '2K', seed: 4, style: 'x' }),
  ],
  [
    'motion-1 body (union, boolean, refine)',
    () =>
      motion.safeParse({
        model: 'motion-1',
        prompt: 'a red fox',
        duration: 6,
        generate_audio: true,
        first_frame_image: 'https://example.com/a.png',
      }),
  ],
  [
    'lumen-lite body, 4 invalid fields',
    () => lite.safeParse({ model: 'lumen-lite', prompt: '', quality: 'max', images: ['x'], seed: 1 }),
  ],
  [
    'list query',
    () => listGenerationsQuerySchema.safeParse({ limit: '50', status: 'queued,failed', model: 'lumen-pro' }),
  ],
];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

console.log(`zod parse, median of ${rounds} rounds × ${iterations} parses (node ${process.version})`);
for (const [name, parse] of cases) {
  for (let i = 0; i < iterations; i++) parse(); // warm-up
  const perParse: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // CPU time, not wall time: on a shared machine the wall clock counts other processes' turns.
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) parse();
    const used = process.cpuUsage(start);
    perParse.push(((used.user + used.system) * 1000) / iterations);
  }
  const ns = median(perParse);
  console.log(
    `${name.padEnd(42)} ${ns.toFixed(0).padStart(7)} ns/parse ${Math.round(1e9 / ns)
      .toLocaleString('en')
      .padStart(12)} parses/s`,
  );
}
