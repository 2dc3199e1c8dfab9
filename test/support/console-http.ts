import http from 'node:http';

/**
 * The console spoken to over plain HTTP, as a script or an attacker would (no browser): forms read
 * from the pages it renders, cookies carried by hand, bodies streamed at their own pace.
 */

/** The cookies an answer sets, as a Cookie header to send back (merged over `previous`). */
export function cookiesOf(response: Response, previous = ''): string {
  const jar = new Map(
    previous
      .split('; ')
      .filter(Boolean)
      .map((pair) => pair.split('=', 2) as [string, string]),
  );
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(';');
    const [name, value] = pair!.split('=', 2) as [string, string];
    if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name);
    else jar.set(name, value);
  }
  return [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
}

/** A hidden input's value in a rendered page. */
export function inputValue(html: string, name: string): string {
  const match = new RegExp(`name="${name}" value="([^"]*)"`).exec(html);
  if (!match) throw new Error(`no input ${name} in the page`);
  return match[1]!;
}

/** Signs in with a pasted key over HTTP; `headers` may name the client (X-Forwarded-For). */
export async function signInOverHttp(
  origin: string,
  key: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; cookie: string; text: string; retryAfter: string | null }> {
  const page = await fetch(`${origin}/sign-in`, { headers });
  const formCookie = cookiesOf(page);
  const csrf = inputValue(await page.text(), '_csrf');
  const answer = await fetch(`${origin}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { ...headers, cookie: formCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrf, key }).toString(),
  });
  return {
    status: answer.status,
    cookie: cookiesOf(answer, formCookie),
    text: await answer.text(),
    retryAfter: answer.headers.get('retry-after'),
  };
}

/** The playground's form for a model, as rendered for this session: its token and Idempotency-Key. */
export async function playgroundForm(
  origin: string,
  cookie: string,
  model: string,
): Promise<{ _csrf: string; model: string; idempotency_key: string }> {
  const page = await fetch(`${origin}/playground?model=${model}`, { headers: { cookie } });
  const html = await page.text();
  return { _csrf: inputValue(html, '_csrf'), model, idempotency_key: inputValue(html, 'idempotency_key') };
}

/** A multipart part: a field, or a file of `size` bytes (repeating `fill`). */
export type Part =
  | { name: string; value: string }
  | { name: string; filename: string; type: string; size: number; fill?: Buffer };

export interface StreamedAnswer {
  status: number;
  text: string;
  /** From the end of the request's headers to the answer's headers, in ms. */
  answeredAfterMs: number;
  /** Body bytes sent before the answer came (the rest was not sent). */
  sentBytes: number;
  /** The answer's Connection header. */
  connection: string | undefined;
}

/**
 * A multipart POST streamed as a browser would send it, with backpressure; chunked unless
 * `declareLength` (then with its Content-Length). Writing stops once the server has answered: a
 * server that answers before reading is not made to read the rest.
 */
export function streamMultipart(
  url: string,
  parts: Part[],
  options: { cookie?: string; declareLength?: boolean } = {},
): Promise<StreamedAnswer> {
  const boundary = `----console-test-${Math.random().toString(36).slice(2)}`;
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  const heads = parts.map((part) =>
    Buffer.from(
      'filename' in part
        ? `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: ${part.type}\r\n\r\n`
        : `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}`,
    ),
  );
  const tail = Buffer.from(`--${boundary}--\r\n`);
  const length =
    heads.reduce((sum, head) => sum + head.length + 2, 0) +
    parts.reduce((sum, part) => sum + ('filename' in part ? part.size : 0), 0) +
    tail.length;
  return new Promise((resolve, reject) => {
    let answered = false;
    let sentBytes = 0;
    let headersAt = 0;
    const request = http.request(url, {
      method: 'POST',
      headers: {
        'content-type': `multipart/form-data; boundary=${boundary}`,
        ...(options.cookie ? { cookie: options.cookie } : {}),
        ...(options.declareLength ? { 'content-length': String(length) } : {}),
      },
    });
    request.on('response', (response) => {
      answered = true;
      const answeredAfterMs = performance.now() - headersAt;
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (data: string) => (text += data));
      response.on('end', () => {
        const { connection } = response.headers;
        resolve({ status: response.statusCode!, text, answeredAfterMs, sentBytes, connection });
        request.destroy();
      });
    });
    // Once answered, the server may close or reset the connection under a write: not a failure.
    request.on('error', (error) => (answered ? undefined : reject(error)));
    request.flushHeaders();
    headersAt = performance.now();
    const write = (data: Buffer) =>
      new Promise<void>((done) => {
        sentBytes += data.length;
        if (request.write(data)) done();
        else request.once('drain', done);
      });
    void (async () => {
      for (const [i, part] of parts.entries()) {
        if (answered) return;
        await write(heads[i]!);
        if ('filename' in part) {
          const fill = part.fill ?? chunk;
          for (let sent = 0; sent < part.size && !answered; sent += fill.length)
            await write(fill.subarray(0, Math.min(fill.length, part.size - sent)));
        }
        await write(Buffer.from('\r\n'));
      }
      if (!answered) {
        await write(tail);
        request.end();
      }
    })().catch(reject);
  });
}
