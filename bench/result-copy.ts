import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runFfmpeg } from '../src/media/ffmpeg.js';
import type { Provider, ProviderResult } from '../src/providers/provider.js';
import { copyResult } from '../src/providers/result-copy.js';
import { downloadResult } from '../src/providers/result-download.js';
import { LocalStorage } from '../src/storage/storage.js';

/**
 * npm run bench:result-copy — memory of copying one large provider result: a BENCH_COPY_MB
 * (default 300) MB MP4 served from a loopback server at BENCH_COPY_MBPS (default unlimited) is
 * copied through the worker's real path (downloadResult → measure → storage), and the process's
 * peak resident memory above its level before the copy is printed. Target: a few tens of MB,
 * whatever the file's size (the copy streams to disk).
 */
const megabytes = Number(process.env.BENCH_COPY_MB ?? 300);
const mbps = Number(process.env.BENCH_COPY_MBPS ?? 0);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-result-copy-'));
try {
  // A real one-second MP4 (index first), then a `free` box of zeros up to the size: a valid file.
  const clip = path.join(dir, 'clip.mp4');
  await runFfmpeg([
    '-y',
    '-hide_banner',
    '-f',
    'lavfi',
    '-i',
    'testsrc=size=320x240:rate=10',
    '-t',
    '1',
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-movflags',
    '+faststart',
    clip,
  ]);
  const head = await readFile(clip);
  const total = megabytes * 1024 * 1024;
  const freeBox = Buffer.alloc(8);
  freeBox.writeUInt32BE(total - head.length, 0);
  freeBox.write('free', 4, 'latin1');
  const zeros = Buffer.alloc(64 * 1024);
  const server = http.createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'video/mp4', 'content-length': total });
    response.write(head);
    response.write(freeBox);
    let left = total - head.length - freeBox.length;
    const started = Date.now();
    const pump = () => {
      while (left > 0) {
        if (mbps > 0 && (total - left) / 1024 / 1024 > ((Date.now() - started) / 1000) * mbps)
          return void setTimeout(pump, 5);
        const chunk = zeros.subarray(0, Math.min(left, zeros.length));
        left -= chunk.length;
        if (!response.write(chunk)) return void response.once('drain', pump);
      }
      response.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/video.mp4`;
  const policy = { allowCidrs: ['127.0.0.1/32'], allowHttp: true };
  const provider = {
    fetchResult: (_jobId: string, _index: number, result: ProviderResult) =>
      downloadResult(result.url!, policy),
  } as unknown as Provider;
  const storage = new LocalStorage(path.join(dir, 'store'), 'http://results.bench');

  global.gc?.();
  const baseline = process.memoryUsage.rss();
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
  const started = Date.now();
  const stored = await copyResult(
    provider,
    {
      jobId: 'bench',
      reference: 'bench',
      index: 0,
      result: { url, width: 0, height: 0, contentType: 'video/mp4' },
    },
    storage,
    'rbench',
  );
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  const seconds = (Date.now() - started) / 1000;
  const size = (await stat(path.join(dir, 'store', 'rbench', 'output-0.mp4'))).size;
  server.close();
  console.log(
    `copied ${(size / 1024 / 1024).toFixed(0)} MB (${stored.contentType}, ${stored.width}x${stored.height}) in ${seconds.toFixed(1)} s`,
  );
  console.log(
    `RSS before ${(baseline / 1024 / 1024).toFixed(0)} MB, peak ${(peak / 1024 / 1024).toFixed(0)} MB: growth ${((peak - baseline) / 1024 / 1024).toFixed(1)} MB`,
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
