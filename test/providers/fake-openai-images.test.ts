import { imageSize } from 'image-size';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drawImage } from '../support/providers/fake-files.js';
import { promptContains } from '../support/providers/fake-http.js';
import { OpenAiImagesServer, openAiError } from '../support/providers/openai-images-server.js';
import { call, outcomeWithin } from '../support/providers/plain-fetch.js';

// The OpenAI Images fake, exercised with plain fetch, so that an adapter test failing later points
// at the adapter and not at the fake.

describe('OpenAI Images fake', () => {
  let openai: OpenAiImagesServer;
  let api: string;
  const auth = { authorization: 'Bearer sk-test-key' };
  const generate = (json: unknown, headers: Record<string, string> = auth, signal?: AbortSignal) =>
    call(`${api}/images/generations`, { method: 'POST', headers, json, signal });
  const measure = (b64: string) => imageSize(Buffer.from(b64, 'base64'));
  beforeAll(async () => {
    openai = await OpenAiImagesServer.start();
    api = openai.env().OPENAI_BASE_URL!;
  });
  afterAll(() => openai.close());

  it('refuses a call without the key or with another one, and never logs the key', async () => {
    const none = await generate({ model: 'gpt-image-1', prompt: 'x' }, {});
    expect([none.status, none.body.error.type]).toEqual([401, 'invalid_request_error']);
    const wrong = await generate({ model: 'gpt-image-1', prompt: 'x' }, { authorization: 'Bearer sk-wrong' });
    expect([wrong.status, wrong.body.error.code]).toEqual([401, 'invalid_api_key']);
    expect(openai.creates).toBe(0);
    expect(JSON.stringify(openai.requests)).not.toContain('sk-wrong');
  });

  it('generates synchronously: b64_json images of the requested size and format, with usage', async () => {
    const answer = await generate({
      model: 'gpt-image-1',
      prompt: 'a kite',
      size: '1536x1024',
      n: 2,
      quality: 'low',
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-request-id')).toMatch(/^req_/);
    expect(answer.body).toMatchObject({
      size: '1536x1024',
      quality: 'low',
      output_format: 'png',
      usage: { total_tokens: 300 },
    });
    expect(answer.body.data).toHaveLength(2);
    expect(measure(answer.body.data[0].b64_json)).toMatchObject({ width: 1536, height: 1024, type: 'png' });
    const jpeg = await generate({ model: 'gpt-image-1', prompt: 'a kite', output_format: 'jpeg' });
    expect(measure(jpeg.body.data[0].b64_json)).toMatchObject({ width: 1024, height: 1024, type: 'jpg' });
  });

  it('edits: multipart with one or more image files, and refuses an edit without an image', async () => {
    const form = new FormData();
    form.append('model', 'gpt-image-1');
    form.append('prompt', 'make it night');
    form.append('size', '1024x1536');
    const png = await drawImage(64, 48);
    form.append('image[]', new Blob([png], { type: 'image/png' }), 'first.png');
    form.append('image[]', new Blob([png], { type: 'image/png' }), 'second.png');
    const answer = await call(`${api}/images/edits`, { method: 'POST', headers: auth, body: form });
    expect(answer.status).toBe(200);
    expect(measure(answer.body.data[0].b64_json)).toMatchObject({ width: 1024, height: 1536 });
    expect(
      openai
        .accepted()
        .at(-1)!
        .images.map((image) => [image.name, image.size]),
    ).toEqual([
      ['first.png', png.length],
      ['second.png', png.length],
    ]);
    expect(JSON.parse(openai.requests.at(-1)!.body)).toMatchObject({
      prompt: 'make it night',
      images: [{ name: 'first.png' }, {}],
    });

    const empty = new FormData();
    empty.append('model', 'gpt-image-1');
    empty.append('prompt', 'make it night');
    const refused = await call(`${api}/images/edits`, { method: 'POST', headers: auth, body: empty });
    expect([refused.status, refused.body.error.param]).toEqual([400, 'image']);
  });

  it('refuses invalid parameters with 400 invalid_request_error naming the parameter', async () => {
    const cases: Array<[unknown, string]> = [
      [{ model: 'gpt-image-1' }, 'prompt'],
      [{ model: 'gpt-image-9', prompt: 'x' }, 'model'],
      [{ model: 'gpt-image-1', prompt: 'x', size: '999x999' }, 'size'],
      [{ model: 'gpt-image-1', prompt: 'x', n: 11 }, 'n'],
    ];
    for (const [input, param] of cases) {
      const refused = await generate(input);
      expect([refused.status, refused.body.error.type, refused.body.error.param]).toEqual([
        400,
        'invalid_request_error',
        param,
      ]);
    }
  });

  it('plays moderation refusals, throttling and server errors as scripted, none of them billed', async () => {
    const billed = openai.accepted().length;
    openai.script({
      fault: {
        kind: 'status',
        status: 400,
        body: openAiError(
          'Rejected by the safety system.',
          'image_generation_user_error',
          'moderation_blocked',
        ),
      },
    });
    openai.script({ fault: { kind: 'status', status: 429, retryAfter: 7 } });
    openai.script({ fault: { kind: 'status', status: 500 } });
    openai.script({ fault: { kind: 'status', status: 503 } });
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const answer = await generate({ model: 'gpt-image-1', prompt: 'x' });
      seen.push([
        answer.status,
        answer.body.error.code ?? answer.body.error.type,
        answer.headers.get('retry-after'),
      ]);
    }
    expect(seen).toEqual([
      [400, 'moderation_blocked', null],
      [429, 'rate_limit_exceeded', '7'],
      [500, 'server_error', null],
      [503, 'server_error', null],
    ]);
    expect(openai.accepted().length).toBe(billed);
  });

  it('loses the answer after reading the call: no answer, a dropped connection, a body cut short', async () => {
    const before = { creates: openai.creates, billed: openai.accepted().length };
    openai.script({ fault: { kind: 'hang' } }, promptContains('hang'));
    const controller = new AbortController();
    const hung = generate({ model: 'gpt-image-1', prompt: 'hang' }, auth, controller.signal);
    expect(await outcomeWithin(hung, 300)).toBe('no answer');
    controller.abort();
    await hung.catch(() => undefined);

    openai.script({ delayMs: 100, fault: { kind: 'drop' } }, promptContains('drop'));
    expect(await outcomeWithin(generate({ model: 'gpt-image-1', prompt: 'drop' }), 2000)).toMatch(/^failed/);

    openai.script({ truncate: true }, promptContains('cut'));
    const cut = fetch(`${api}/images/generations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-image-1', prompt: 'cut' }),
    });
    const response = await cut;
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();

    expect(openai.creates - before.creates).toBe(3);
    // All three reached OpenAI whole: it may have run, and billed, each of them.
    expect(
      openai
        .accepted()
        .slice(before.billed)
        .map((c) => c.input.prompt),
    ).toEqual(['hang', 'drop', 'cut']);
  });
});
