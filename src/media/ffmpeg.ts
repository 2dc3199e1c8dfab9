import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

/** Longest one ffmpeg run may take (the persisting activity's heartbeat timeout is 2 minutes). */
const ffmpegTimeoutMs = 100_000;

let ffmpegPath: string | undefined;

/** The static ffmpeg shipped by @ffmpeg-installer (resolved on first use, so a missing binary only fails video jobs). */
function ffmpegBinary(): string {
  if (ffmpegPath === undefined) {
    try {
      const installer = createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string };
      ffmpegPath = installer.path;
    } catch (error) {
      // The installer throws a bare string when its platform package is missing.
      throw new Error(`ffmpeg is not available: ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
      });
    }
  }
  return ffmpegPath;
}

/**
 * Runs ffmpeg (no shell) and resolves with what it wrote on stderr (where
 * ffmpeg reports, stream descriptions included); rejects with the end of
 * that output when it fails. It is killed after `timeoutMs` (100 s unless
 * told), or at once when `signal` aborts (the caller has gone: its work is
 * nobody's any more).
 */
export function runFfmpeg(
  args: string[],
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<string> {
  const binary = ffmpegBinary();
  const { signal, timeoutMs = ffmpegTimeoutMs } = options;
  if (signal?.aborted) return Promise.reject(abortedRun(signal));
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: ffmpegEnvironment(process.env),
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    const abort = () => child.kill('SIGKILL');
    signal?.addEventListener('abort', abort, { once: true });
    const settled = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    };
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      if (stderr.length > 1_000_000) stderr = stderr.slice(-500_000);
    });
    child.on('error', (error) => {
      settled();
      reject(new Error(`could not run ffmpeg (${binary}): ${error.message}`));
    });
    child.on('close', (code, signalName) => {
      settled();
      if (code === 0) return resolve(stderr);
      if (signal?.aborted) return reject(abortedRun(signal));
      const why = timedOut
        ? `took longer than ${timeoutMs} ms and was stopped`
        : signalName
          ? `was killed by ${signalName}`
          : `exited with code ${code}`;
      reject(new Error(`ffmpeg ${why}: ${stderr.trim().slice(-4000) || '(no output)'}`));
    });
  });
}

/** The rejection of a run stopped by its signal: its reason when an Error, else an AbortError. */
function abortedRun(signal: AbortSignal): Error {
  return signal.reason instanceof Error
    ? signal.reason
    : new DOMException('ffmpeg was stopped: its caller has gone', 'AbortError');
}

/**
 * What ffmpeg inherits of its parent's environment: where to find programs and temporary files,
 * and the locale. The worker that measures results holds the providers' keys and the database URL;
 * ffmpeg reads files that providers and clients made and needs none of them.
 */
export function ffmpegEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(([name]) => /^(PATH|TMPDIR|TMP|TEMP|TZ|LANG|LC_\w+)$/.test(name)),
  );
}

/**
 * The demuxers a file someone else made may be opened with: MP4/MOV, Matroska/WebM and GIF, the
 * containers providers deliver. The bundled ffmpeg is a 2018 build; a crafted file cannot steer it
 * into another demuxer (concat, HLS, image2 sequences and dozens more, each its own parser and
 * some of them readers of other files or URLs), nor any protocol but plain files.
 */
const untrustedFormats = 'mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,gif';

/** `-i file` for a file we did not make: only the file protocol and the demuxers above. */
export function untrustedInput(file: string): string[] {
  return ['-protocol_whitelist', 'file', '-format_whitelist', untrustedFormats, '-i', file];
}
