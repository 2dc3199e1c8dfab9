import { imageSize } from 'image-size';

/** Plain fetch for the fake provider servers' own tests: status, headers and the body (JSON if it parses). */
export async function call(url: string, init: RequestInit & { json?: unknown } = {}) {
  const { json, ...rest } = init;
  const response = await fetch(url, {
    ...rest,
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    headers: { ...(json === undefined ? {} : { 'content-type': 'application/json' }), ...rest.headers },
  });
  const text = await response.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, headers: response.headers, body };
}

export async function download(url: string) {
  const response = await fetch(url);
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    size: response.ok ? imageSize(bytes) : undefined,
  };
}

/** Resolves with how the fetch ended: 'no answer' if nothing came back within `ms`. */
export async function outcomeWithin(promise: Promise<unknown>, ms: number): Promise<string> {
  const timer = new Promise<string>((resolve) => setTimeout(() => resolve('no answer'), ms));
  return Promise.race([
    promise.then(
      () => 'answered',
      (error: Error) => `failed: ${error.message}`,
    ),
    timer,
  ]);
}
