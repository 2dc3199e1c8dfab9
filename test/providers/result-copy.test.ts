import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/vocabulary/errors.js';
import { createLogger } from '../../src/process/logger.js';
import { runFfmpeg } from '../../src/media/ffmpeg.js';
import {
  ProviderResultGone,
  ProviderTransientError,
  type Provider,
  type ProviderResult,
} from '../../src/providers/provider.js';
import { copyResult } from '../../src/providers/result-copy.js';
import { downloadResult, type DownloadTimeouts } from '../../src/providers/result-download.js';
import { buildResultHost } from '../../src/result-host/server.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { startTestServer, type TestServer } from '../support/test-servers.js';

/**
 * Copying a provider's result into our storage through the real path: downloaded under the
 * outbound rules into a temporary file (streamed, no deadline on the whole transfer, only on
 * silence), measured from its bytes, stored under what it is and served as that.
 */
describe('copying a result from a provider', () => {
  let files: TestServer;
  let folder: string;
  let storage: LocalStorage;
  const media: Record<string, Buffer> = {};
  const policy = { allowCidrs: ['127.0.0.1/32'], allowHttp: true };
  const fast: DownloadTimeouts = { headersTimeoutMs: 2_000, idleTimeoutMs: 400 };

  beforeAll(async () => {
    folder = await mkdtemp(path.join(os.tmpdir(), 'result-copy-'));
    storage = new LocalStorage(path.join(folder, 'store'), 'http://results.test');
    const encode = async (name: string, args: string[]) => {
      const file = path.join(folder, name);
      await runFfmpeg([
        '-y',
        '-hide_banner',
        '-f',
        'lavfi',
        '-i',
        'testsrc=size=96x64:rate=10',
        '-t',
        '1',
        ...args,
        file,
      ]);
      media[name] = await readFile(file);
    };
    await encode('clip.webm', ['-c:v', 'libvpx-vp9']);
    await encode('clip.avi', []);
    media['anim.gif'] = await sharp({ create: { width: 48, height: 32, channels: 3, background: '#0a0' } })
      .gif()
      .toBuffer();
    const routes: Record<string, (response: ServerResponse) => void> = {
      '/slow-but-steady': (response) => {
        // 2 s of body, a chunk every 100 ms: longer than any total deadline this test would allow.
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        let sent = 0;
        const timer = setInterval(() => {
          response.write(Buffer.alloc(64 * 1024, sent));
          if (++sent === 20) {
            clearInterval(timer);
            response.end();
          }
        }, 100);
      },
      '/stalls': (response) => {
        response.writeHead(200, { 'content-type': 'video/mp4' });
        response.write(Buffer.alloc(1024)); // then nothing, ever
      },
      '/gzipped': (response) => response.writeHead(200, { 'content-encoding': 'gzip' }).end('x'),
    };
    files = await startTestServer((request, response) => {
      const url = request.url ?? '';
      const status = /^\/status\/(\d+)$/.exec(url);
      if (status) return void response.writeHead(Number(status[1])).end();
      const file = media[url.slice(1)];
      if (file) return void response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(file);
      const route = routes[url];
      if (route) return route(response);
      response.writeHead(404).end();
    });
  });
  afterAll(async () => {
    await files?.close();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  const download = (name: string, timeouts = fast) =>
    downloadResult(`${files.origin}/${name}`, policy, timeouts);
  const failure = (name: string) =>
    download(name).then(
      () => null,
      (error: unknown) => error,
    );
  /** A provider whose results are the test server's files, downloaded as a real adapter does. */
  const downloading = {
    fetchResult: (_job: string, _index: number, result: ProviderResult) =>
      downloadResult(result.url!, policy, fast),
  } as unknown as Provider;
  /** copyResult of the test server's file `name` as result `index`, into the folder `prefix`. */
  const copyFile = (provider: Provider, name: string, index: number, prefix: string) =>
    copyResult(
      provider,
      {
        jobId: 'job',
        reference: 'fal:job',
        index,
        result: {
          url: `${files.origin}/${name}`,
          width: 0,
          height: 0,
          contentType: 'application/octet-stream',
        },
      },
      storage,
      prefix,
    );

  it('only 403, 404 and 410 say a result is gone; TLS, other statuses and encodings are tried again', async () => {
    for (const status of [403, 404, 410])
      expect(await failure(`status/${status}`)).toBeInstanceOf(ProviderResultGone);
    for (const name of ['status/400', 'status/401', 'status/500', 'gzipped'])
      expect(await failure(name)).toBeInstanceOf(ProviderTransientError);
    const tls = await downloadResult(
      files.origin.replace('http:', 'https:') + '/anim.gif',
      policy,
      fast,
    ).catch((error: unknown) => error);
    expect(tls).toBeInstanceOf(ProviderTransientError);
    // A URL our rules never fetch (here: an address that is not allowed) can never be copied.
    expect(
      await downloadResult(`${files.origin}/anim.gif`, { allowCidrs: [], allowHttp: true }, fast).catch(
        (e: unknown) => e,
      ),
    ).toBeInstanceOf(PermanentError);
  });

  it('streams to a file with no deadline on the whole: a steady slow body arrives, a silent one times out', async () => {
    const started = Date.now();
    const content = await download('slow-but-steady');
    expect(Date.now() - started).toBeGreaterThan(1_500);
    expect('file' in content && content.size).toBe(20 * 64 * 1024);
    if ('file' in content) {
      expect((await readFile(content.file)).length).toBe(20 * 64 * 1024);
      await content.dispose();
      await expect(readFile(content.file)).rejects.toThrow();
    }
    const stalled = await failure('stalls');
    expect(stalled).toBeInstanceOf(ProviderTransientError);
    expect((stalled as Error).message).toContain('sent nothing for 400 ms');
  });

  it('stores GIF and WebM as what they are, served as image/gif and video/webm; another container is refused', async () => {
    const copy = (name: string, index: number) => copyFile(downloading, name, index, 'r0123456789abcdef');
    const gif = await copy('anim.gif', 0);
    const webm = await copy('clip.webm', 1);
    expect(gif).toMatchObject({
      url: 'http://results.test/r0123456789abcdef/output-0.gif',
      contentType: 'image/gif',
      width: 48,
      height: 32,
    });
    expect(webm).toMatchObject({
      url: 'http://results.test/r0123456789abcdef/output-1.webm',
      contentType: 'video/webm',
      width: 96,
      height: 64,
    });
    await expect(copy('clip.avi', 2)).rejects.toBeInstanceOf(PermanentError);

    const host = await buildResultHost({
      storageDir: path.join(folder, 'store'),
      logger: createLogger('result-host', 'silent'),
    });
    try {
      for (const [name, type] of [
        ['output-0.gif', 'image/gif'],
        ['output-1.webm', 'video/webm'],
      ]) {
        const served = await host.inject({ method: 'GET', url: `/r0123456789abcdef/${name}` });
        expect(served.statusCode).toBe(200);
        expect(served.headers['content-type']).toBe(type);
      }
    } finally {
      await host.close();
    }
  });
});
