import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from '../../src/dev/free-port.js';
import { pythonToolPython } from '../../src/dev/python-tool.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';

/**
 * moto's S3 server (PyPI), pinned: a real S3-compatible server speaking the protocol the AWS SDK
 * speaks to AWS, MinIO or R2. Only its S3 part and the server's own needs (flask) are installed:
 * `moto[server]` would add every AWS service's dependencies (2.5 minutes and 290 MB instead of
 * under a minute and 115 MB).
 */
const MOTO_VERSION = '5.2.5';

/**
 * The Python of moto's virtualenv under .tools/, fetched once per checkout by the first test file that
 * starts the server (others wait on its lock): a run of files that need no S3 fetches nothing.
 */
export function motoPython(): Promise<string> {
  return pythonToolPython({
    folder: `moto-${MOTO_VERSION}`,
    requirements: [`moto[s3]==${MOTO_VERSION}`, 'flask==3.1.3', 'flask-cors==6.0.5'],
    check: ['-c', 'import moto.server, flask, flask_cors'],
  });
}

/** moto accepts any credentials; these are the ones every test client and process uses. */
export const testCredentials = { accessKeyId: 'test-access-key', secretAccessKey: 'test-secret-key' };

export interface S3TestServer {
  /** `http://127.0.0.1:PORT`. */
  endpoint: string;
  /** A client with the test credentials, for looking at the bucket behind the service's back. */
  client: S3Client;
  /** Creates a bucket with a fresh name and returns it. */
  createBucket(): Promise<string>;
  /**
   * What a process needs to store in `bucket` (under `keyPrefix`) through `endpoint` (this
   * server, or a proxy in front of it): STORAGE_URL, the S3_ variables and the credentials the
   * SDK's chain reads from the environment.
   */
  env(bucket: string, keyPrefix?: string, endpoint?: string): Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts moto on a free loopback port for this test file, and points this process's AWS SDK
 * credential chain at the test credentials: without them the chain would go on to the instance
 * metadata address, which is not loopback.
 */
export async function startS3Server(): Promise<S3TestServer> {
  const awsNames = [
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_EC2_METADATA_DISABLED',
    'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
  ] as const;
  // Put back by stop(): the test process runs other files after this one.
  const saved = Object.fromEntries(awsNames.map((name) => [name, process.env[name]]));
  process.env.AWS_ACCESS_KEY_ID = testCredentials.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = testCredentials.secretAccessKey;
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  // The SDK's notice that its releases after January 2027 need Node 22, once per process.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const python = await motoPython();
  let child: ChildProcess | undefined;
  let port = 0;
  let output = '';
  // A free port can be taken between the look and moto's bind: try another.
  for (let attempt = 0; attempt < 3 && !child; attempt++) {
    port = await freePort();
    const started = spawn(python, ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    started.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    if (await answers(`http://127.0.0.1:${port}/moto-api/`, started)) child = started;
    else started.kill('SIGKILL');
  }
  if (!child) throw new Error(`moto did not start: ${output.slice(-2000)}`);
  const running = child;
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: testCredentials,
  });
  return {
    endpoint,
    client,
    async createBucket() {
      const bucket = `test-${randomBase62(12).toLowerCase()}`;
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
      return bucket;
    },
    env: (bucket, keyPrefix = '', through = endpoint) => ({
      STORAGE_URL: `s3://${bucket}/${keyPrefix}`,
      S3_ENDPOINT: through,
      S3_REGION: 'us-east-1',
      S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: testCredentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: testCredentials.secretAccessKey,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    }),
    async stop() {
      client.destroy();
      if (running.exitCode === null) {
        const exited = new Promise((resolve) => running.once('exit', resolve));
        running.kill('SIGTERM');
        await exited;
      }
      for (const name of awsNames)
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
    },
  };
}

/** Whether the server answers within 30 s (moto takes a second or two to import). */
async function answers(url: string, child: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && child.exitCode === null) {
    const ok = await fetch(url).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

/**
 * What a faulty proxy does with one request: answer it itself, pass it on (undefined), or `hang`
 * (never answer: a store that stalls; the connection stays open until the client goes or the proxy closes).
 */
export type Fault = (request: {
  method: string;
  url: string;
  body: Buffer;
}) => { status: number; body: string; headers?: Record<string, string> } | 'hang' | undefined;

export interface FaultyProxy {
  /** `http://127.0.0.1:PORT`: give it to the service as S3_ENDPOINT. */
  endpoint: string;
  /** Requests the fault answered. */
  faulted: number;
  /** What goes wrong now; null: nothing, every request reaches the server. */
  fault: Fault | null;
  close(): Promise<void>;
}

/**
 * A loopback proxy in front of the S3 server that makes chosen requests fail, the way a real
 * store fails now and then (an error status, a DeleteObjects that names keys it could not delete).
 * Everything else reaches the real server unchanged.
 */
export async function startFaultyProxy(target: string): Promise<FaultyProxy> {
  const state: FaultyProxy = { endpoint: '', faulted: 0, fault: null, close: async () => {} };
  const upstream = new URL(target);
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const answer = state.fault?.({ method: request.method ?? 'GET', url: request.url ?? '/', body });
      if (answer === 'hang') {
        state.faulted++;
        return;
      }
      if (answer) {
        state.faulted++;
        response.writeHead(answer.status, { 'content-type': 'application/xml', ...answer.headers });
        response.end(answer.body);
        return;
      }
      const forwarded = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: request.method,
          path: request.url,
          headers: request.headers,
        },
        (reply) => {
          response.writeHead(reply.statusCode ?? 502, reply.headers);
          reply.pipe(response);
        },
      );
      forwarded.on('error', () => response.destroy());
      forwarded.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

/** A fault: every DeleteObjects (POST ?delete) answers 200 naming each key as not deleted (AccessDenied). */
export const deleteObjectsDenied: Fault = ({ method, url, body }) => {
  if (method !== 'POST' || !/[?&]delete(=|&|$)/.test(url)) return undefined;
  const keys = [...body.toString('utf8').matchAll(/<Key>([^<]*)<\/Key>/g)].map((match) => match[1]!);
  const errors = keys
    .map((key) => `<Error><Key>${key}</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
    .join('');
  return {
    status: 200,
    body: `<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${errors}</DeleteResult>`,
  };
};
