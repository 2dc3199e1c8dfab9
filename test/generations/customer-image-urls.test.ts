import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ProviderName } from '../../src/catalog/provider-mapping.js';
import type { Provider } from '../../src/providers/provider.js';
import { bearer } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { drawImage } from '../support/providers/fake-files.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { useGenerationStack } from '../support/stack.js';
import { offerExampleModels, workerProviders } from '../support/worker-providers.js';
import { selfSignedCertificate, startTestServer, type TestServer } from '../support/test-servers.js';

/**
 * A customer's own reference image URL, on fal and Replicate: fetched once by us, in the step
 * before the submit, under the outbound rules and the reference image limits, and stored under
 * the generation's inputs; the provider is sent our copy. A URL that cannot be used is the
 * request's fault: refunded, no provider call, nothing counted against the provider.
 */
describe('customer image URLs are fetched and stored once, before the submit', () => {
  let fal: FalQueueServer;
  let replicate: ReplicateServer;
  /** The customer's image host: HTTPS on loopback, which outbound fetches refuse unless allowed. */
  let pictures: TestServer;
  let cat: Buffer;
  const apiEnv: Record<string, string> = {};
  /** Loopback allowed and the test certificate trusted, as OUTBOUND_ALLOW_CIDRS and a CA would. */
  const referenceImageFetch = { allowCidrs: ['127.0.0.1/32'], allowHttp: false, extraCa: [] as string[] };
  let providerFor: (name: ProviderName) => Provider;

  beforeAll(async () => {
    const certificate = await selfSignedCertificate();
    referenceImageFetch.extraCa.push(certificate.cert);
    cat = await drawImage(64, 48, 'png');
    const page = Buffer.from('<html>not an image</html>');
    const huge = Buffer.alloc(11 * 1024 * 1024, 7);
    pictures = await startTestServer(
      (request, response) => {
        const file = new URL(request.url ?? '/', 'https://x').pathname;
        if (file === '/cat.png') response.writeHead(200, { 'content-type': 'image/png' }).end(cat);
        else if (file === '/page.png') response.writeHead(200, { 'content-type': 'text/html' }).end(page);
        else if (file === '/huge.png') response.writeHead(200, { 'content-type': 'image/png' }).end(huge);
        else response.writeHead(404).end();
      },
      { tls: certificate },
    );
    fal = await FalQueueServer.start();
    replicate = await ReplicateServer.start();
    Object.assign(apiEnv, fal.env(), replicate.env());
  });
  afterAll(async () => {
    await pictures?.close();
    await fal?.close();
    await replicate?.close();
  });
  const stack = useGenerationStack({
    apiEnv,
    worker: { overrides: { providerFor: (name) => providerFor(name), referenceImageFetch } },
  });
  beforeAll(async () => {
    providerFor = workerProviders(stack, apiEnv);
    await offerExampleModels(
      stack,
      ['catalog/examples/fal.json', 'catalog/examples/replicate.json'],
      ['fal-flux-kontext-pro', 'replicate-flux-kontext-pro'],
    );
  });

  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json<{ credits: number }>().credits;
  const fetchesOf = (file: string) => pictures.requests.filter((url) => url === file).length;
  const createsFor = (server: FalQueueServer | ReplicateServer, text: string) =>
    server.requests.filter((r) => r.method === 'POST' && r.body.includes(text)).length;
  const inputPrefixOf = (id: string) =>
    stack.db.pool.oneFirst(sql.type(z.object({ input_prefix: z.string().nullable() }))`
      SELECT input_prefix FROM generations WHERE id = ${id}`);
  const catDataUri = () => `data:image/png;base64,${cat.toString('base64')}`;

  const cases = [
    {
      provider: 'fal',
      model: 'fal-flux-kontext-pro',
      server: () => fal as FalQueueServer | ReplicateServer,
      /** What the provider was sent as the reference image, for the create whose prompt holds `text`. */
      sent: (text: string) =>
        fal.accepted().find((job) => String(job.input.prompt).includes(text))?.input.image_url,
    },
    {
      provider: 'replicate',
      model: 'replicate-flux-kontext-pro',
      server: () => replicate as FalQueueServer | ReplicateServer,
      sent: (text: string) =>
        replicate.accepted().find((p) => String(p.input.prompt).includes(text))?.input.input_image,
    },
  ];

  it.each(cases)(
    '$provider gets our stored copy; the customer’s host is fetched once though the submit is retried',
    async ({ provider, model, server, sent }) => {
      const prompt = `a cat in a hat on ${provider}`;
      // The first create is throttled (429): the submit is tried again, the image is not fetched again.
      server().failCreate({ kind: 'status', status: 429, retryAfter: 1 }, (input) =>
        JSON.stringify(input).includes(prompt),
      );
      const file = `/cat.png?for=${provider}`;
      const response = await createGeneration(stack.api, stack.account.key, {
        model,
        prompt,
        images: [`${pictures.origin}${file}`],
      });
      expect(response.statusCode, response.body).toBe(202);
      const id = response.json<{ id: string }>().id;
      const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 60_000);
      expect(done).toMatchObject({ status: 'succeeded', error: null });
      // The record still shows the request as the customer sent it.
      expect(done.input.images).toEqual([`${pictures.origin}${file}`]);

      expect(createsFor(server(), prompt)).toBeGreaterThanOrEqual(2);
      expect(sent(prompt)).toBe(catDataUri());
      expect(pictures.requests.filter((url) => url === file)).toHaveLength(1);
      // Our copy lives under the generation's inputs, deleted with them.
      const prefix = await inputPrefixOf(id);
      expect(prefix).not.toBeNull();
      const names = await readdir(path.join(stack.worker.storageDir, prefix!));
      expect(names).toHaveLength(1);
      expect(await readFile(path.join(stack.worker.storageDir, prefix!, names[0]!))).toEqual(cat);
    },
    90_000,
  );

  it.each(cases)(
    '$provider: a URL that cannot be used (404, not an image, too large) is refunded without a provider call',
    async ({ provider, model, server }) => {
      const before = await balance();
      const urls = ['/missing.png', '/page.png', '/huge.png'].map(
        (file) => `${pictures.origin}${file}?for=${provider}`,
      );
      const ids = await Promise.all(
        urls.map(async (url, i) => {
          const response = await createGeneration(stack.api, stack.account.key, {
            model,
            prompt: `refused ${provider} ${i}`,
            images: [url],
          });
          expect(response.statusCode, response.body).toBe(202);
          return response.json<{ id: string }>().id;
        }),
      );
      for (const id of ids)
        expect(await pollGeneration(stack.api, stack.account.key, id, undefined, 60_000)).toMatchObject({
          status: 'failed',
          credits_refunded: true,
          error: {
            code: 'provider_rejected',
            message: expect.stringContaining('reference image') as unknown,
          },
        });
      for (const [i] of urls.entries()) expect(createsFor(server(), `refused ${provider} ${i}`)).toBe(0);
      // Each URL asked once: a 404, a page or an oversized body is final, not retried.
      for (const file of ['/missing.png', '/page.png', '/huge.png'])
        expect(fetchesOf(`${file}?for=${provider}`)).toBe(1);
      expect(await balance()).toBe(before);
      const health = await stack.db.pool.maybeOne(
        sql.type(z.object({ consecutive_failures: z.number() }))`
          SELECT consecutive_failures FROM provider_health WHERE provider = ${provider}`,
      );
      expect(health?.consecutive_failures ?? 0).toBe(0);
    },
    90_000,
  );
});
