import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { VideoJob } from './video-drawing.js';

/** What the simulated provider needs drawn: a picture, or a video with its audio. */
export interface SimRenderer {
  image(prompt: string, width: number, height: number, format: 'png' | 'jpeg'): Promise<Buffer>;
  video(job: VideoJob): Promise<Buffer>;
}

/** Draws in the calling process (sharp and ffmpeg loaded on first use): for tests and scripts. */
export const inProcessRenderer: SimRenderer = {
  async image(prompt, width, height, format) {
    const { renderImage } = await import('./image-drawing.js');
    return renderImage(prompt, width, height, format);
  },
  async video(job) {
    const { renderVideo } = await import('./video-drawing.js');
    return renderVideo(job);
  },
};

/**
 * What the renderer inherits of the worker's environment: what node, tsx,
 * libvips and TLS read, nothing else. The renderer decodes images and fetches
 * URLs that clients chose; the database URL and any other secret of the
 * worker stay out of its reach.
 */
const inheritedVariable =
  /^(PATH|HOME|TMPDIR|TMP|TEMP|TZ|LANG|LANGUAGE|LC_\w+|NODE_OPTIONS|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|VIPS_\w+|TSX_\w+)$/;

function rendererEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => inheritedVariable.test(name)));
}

type RenderWork =
  | { kind: 'image'; prompt: string; width: number; height: number; format: 'png' | 'jpeg' }
  | { kind: 'video'; job: VideoJob };
export type RenderRequest = { id: number } & RenderWork;
export type RenderReply = { id: number } & ({ bytes: Uint8Array } | { error: string });

/**
 * Draws in a child process of its own, started on first use and again after
 * it dies. A real provider renders on its own machines; so the worker running
 * our workflows never holds the image library (tens of MB that stay resident
 * once used) nor waits on its work. A render in flight when the child dies
 * fails, and the activity that asked for it is retried.
 */
export class ChildProcessRenderer implements SimRenderer {
  private child: ChildProcess | null = null;
  private readonly pending = new Map<number, { resolve(bytes: Buffer): void; reject(error: Error): void }>();
  private nextId = 0;

  image(prompt: string, width: number, height: number, format: 'png' | 'jpeg'): Promise<Buffer> {
    return this.request({ kind: 'image', prompt, width, height, format });
  }

  video(job: VideoJob): Promise<Buffer> {
    return this.request({ kind: 'video', job });
  }

  /** Stops the child (it also stops by itself when this process goes away). */
  close(): void {
    this.child?.kill();
    this.child = null;
  }

  private request(work: RenderWork): Promise<Buffer> {
    const child = this.child ?? this.start();
    const id = ++this.nextId;
    return new Promise<Buffer>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      child.channel?.ref();
      const request: RenderRequest = { ...work, id };
      child.send(request, (error) => {
        if (error) this.settle(id, { id, error: error.message });
      });
    });
  }

  private start(): ChildProcess {
    // The child module sits beside this one, as TypeScript (run through tsx) or as compiled JavaScript.
    const self = fileURLToPath(import.meta.url);
    const extension = path.extname(self);
    const child = fork(path.join(path.dirname(self), `renderer-child${extension}`), [], {
      // tsx as this module finds it: `--import tsx` alone is looked up from the working directory,
      // which need not be the project's.
      execArgv:
        extension === '.ts' ? ['--import', pathToFileURL(createRequire(self).resolve('tsx')).href] : [],
      env: rendererEnvironment(process.env),
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.on('message', (reply: RenderReply) => this.settle(reply.id, reply));
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = null;
      for (const id of [...this.pending.keys()])
        this.settle(id, { id, error: `the renderer process exited (${signal ?? code})` });
    });
    // Idle, the child must not keep this process alive; a pending render refs the channel again.
    child.unref();
    child.channel?.unref();
    this.child = child;
    return child;
  }

  private settle(id: number, reply: RenderReply): void {
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.child?.channel?.unref();
    if ('error' in reply) waiter.reject(new Error(reply.error));
    else waiter.resolve(Buffer.from(reply.bytes.buffer, reply.bytes.byteOffset, reply.bytes.byteLength));
  }
}
