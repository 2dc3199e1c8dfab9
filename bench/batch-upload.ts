import http from 'node:http';
import { freePort } from '../src/dev/free-port.js';
import { inspect } from './inspector.js';
import { startStack } from './stack.js';
import { printColumns, rssKb } from './support.js';

/**
 * npm run bench:batch-upload — the API's memory while it takes a batch as JSON (`{"requests":
 * [...], ...}`), read as it arrives: batches of BENCH_UPLOAD_SIZES lines (5,000, then 50,000 twice)
 * each posted over HTTP, its body sent in chunks as it is made (the envelope after the lines). The
 * 50,000-line body is about 19 MB. For each: the API's RSS before (after a full collection, through
 * the inspector), its peak (read every 50 ms), and after; and its JS heap in use after a full
 * collection, before and after (what the upload left held). Flat means the peak does not grow with
 * the batch's size and nothing is kept. V8 collects lazily, so the peak RSS holds garbage not yet
 * collected: BENCH_API_NODE_OPTIONS=--max-old-space-size=100 caps the API's heap near its resting
 * size (about 63 MiB) to show how little the upload keeps live. BENCH_PROMPT_CHARS (300) sets each
 * line's prompt length, so the body's size (up to BATCH_BODY_LIMIT_BYTES, past the API's general
 * body limit) can grow while the line count stays. Each batch is canceled once created, so the
 * worker stays idle. Figures are printed, never asserted.
 */
const sizes = (process.env.BENCH_UPLOAD_SIZES ?? '5000,50000,50000').split(',').map(Number);
const promptChars = Number(process.env.BENCH_PROMPT_CHARS ?? 300);

const inspectPort = await freePort();
const stack = await startStack(
  // The general limit stays as it is; batches have their own.
  { BATCH_MAX_LINES: String(Math.max(...sizes)), BATCH_LINES_IN_FLIGHT: '1' },
  {
    apiNodeOptions: [
      `--inspect=127.0.0.1:${inspectPort}`,
      ...(process.env.BENCH_API_NODE_OPTIONS ?? '').split(' ').filter(Boolean),
    ],
  },
);
const inspector = await inspect(inspectPort);
/** The API's JS heap in use (kB) after a full collection. */
const heapKb = async () => {
  await inspector.collectGarbage();
  const [main] = await inspector.memory();
  return main!.usage.heapUsed / 1024;
};
const url = new URL(`${stack.apiUrl}/batches`);
const mib = (kb: number) => (kb / 1024).toFixed(1);

/** The JSON body, made as it is sent: the lines first, the envelope after them. */
function* body(lines: number): Generator<string> {
  yield '{"requests": [';
  let chunk = '';
  for (let i = 0; i < lines; i++) {
    const words = 'a quiet harbour at dawn, boats and gulls, '.repeat(Math.ceil(promptChars / 40));
    const prompt = `line ${i}: ${words}`.slice(0, promptChars);
    chunk += `${i ? ',' : ''}${JSON.stringify({ custom_id: `line-${i}`, model: 'lumen-pro', prompt, aspect_ratio: '1:1' })}`;
    if (chunk.length >= 64 * 1024) {
      yield chunk;
      chunk = '';
    }
  }
  yield `${chunk}], "completion_window": "24h", "metadata": {"bench": "upload"}}`;
}

/** Posts one batch, writing its body with backpressure; its status, answer and body size. */
function post(lines: number): Promise<{ status: number; text: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const request = http.request(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' },
    });
    request.on('error', reject);
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (c: Buffer) => chunks.push(c));
      response.on('end', () =>
        resolve({ status: response.statusCode!, text: Buffer.concat(chunks).toString('utf8'), bytes }),
      );
    });
    const parts = body(lines);
    const write = () => {
      for (let next = parts.next(); !next.done; next = parts.next()) {
        bytes += Buffer.byteLength(next.value);
        if (!request.write(next.value)) return void request.once('drain', write);
      }
      request.end();
    };
    write();
  });
}

const rows: string[][] = [
  ['lines', 'body MB', 'seconds', 'RSS MiB', 'peak MiB', 'after MiB', 'heap MiB', 'heap after'],
];
try {
  // A small batch first: the route's code and the pool's connections are warm before measuring.
  for (const lines of [50, ...sizes]) {
    const heapBefore = await heapKb();
    const before = await rssKb(stack.apiPid);
    let peak = before;
    const sampler = setInterval(() => {
      void rssKb(stack.apiPid).then((kb) => (peak = Math.max(peak, kb)));
    }, 50);
    const started = Date.now();
    const answer = await post(lines);
    const seconds = (Date.now() - started) / 1000;
    clearInterval(sampler);
    if (answer.status !== 201) throw new Error(`POST ${lines} lines: ${answer.status} ${answer.text}`);
    const id = (JSON.parse(answer.text) as { id: string }).id;
    await fetch(`${stack.apiUrl}/batches/${id}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.key}` },
    });
    const after = await rssKb(stack.apiPid);
    peak = Math.max(peak, after);
    const heapAfter = await heapKb();
    if (lines === 50) continue;
    rows.push([
      String(lines),
      (answer.bytes / 1e6).toFixed(1),
      seconds.toFixed(1),
      mib(before),
      mib(peak),
      mib(after),
      mib(heapBefore),
      mib(heapAfter),
    ]);
  }
  printColumns(8, rows);
} finally {
  inspector.close();
  await stack.stop();
}
