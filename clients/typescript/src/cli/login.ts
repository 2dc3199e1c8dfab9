import { Client } from '../client.js';
import { AbortedError } from '../core/errors.js';
import { chooseBaseURL, readConfig, writeConfig } from './config-file.js';
import { UsageError } from './exit-codes.js';
import type { Io } from './run-command.js';

/** A terminal's input: what Node's tty.ReadStream adds to a stream. */
interface TerminalInput extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

/**
 * Reads a secret from a terminal without showing it: raw mode turns the terminal's echo off, and
 * the characters are collected here (Enter ends, Backspace erases, Ctrl-C stops with exit 130).
 * Off a terminal (a pipe, a file) the whole of stdin is the secret, as before.
 */
export async function readSecret(prompt: string, io: Io): Promise<string> {
  const input = io.stdin as TerminalInput;
  if (!input.isTTY || typeof input.setRawMode !== 'function') {
    let text = '';
    for await (const chunk of input) text += String(chunk);
    return text.trim();
  }
  const setRawMode = input.setRawMode.bind(input);
  setRawMode(true); // before the prompt: a key typed the moment it shows is not echoed either
  io.stderr.write(prompt);
  input.setEncoding('utf8');
  try {
    return await new Promise<string>((resolve, reject) => {
      let secret = '';
      const finish = (error?: Error) => {
        input.off('data', onData);
        input.pause();
        if (error) reject(error);
        else resolve(secret.trim());
      };
      const onData = (chunk: string) => {
        for (const char of chunk) {
          if (char === '\r' || char === '\n' || char === '\u0004') return finish();
          if (char === '\u0003')
            return finish(new AbortedError('gen login: interrupted; nothing was saved.', {}));
          if (char === '\u007f' || char === '\b') secret = secret.slice(0, -1);
          else if (char >= ' ') secret += char;
        }
      };
      input.on('data', onData);
      input.resume();
    });
  } finally {
    setRawMode(false);
    io.stderr.write('\n'); // the Enter was not echoed either
  }
}

/** `gen login`: the key (typed unseen, piped, or --api-key), checked against the API, then kept 0600. */
export async function login(
  flagKey: string | undefined,
  flagBaseURL: string | undefined,
  io: Io,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const stored = await readConfig(env);
  const key = flagKey || (await readSecret('API key (not shown as you type): ', io));
  if (!key) throw new UsageError('gen login: no key given');
  const baseURL = chooseBaseURL(env, flagBaseURL, stored);
  // Checked before it is kept: a mistyped key is an error now, not at the next run.
  const client = new Client({ apiKey: key, ...(baseURL ? { baseURL } : {}) });
  const balance = await client.credits.get();
  const keptBaseURL = flagBaseURL ?? stored.base_url;
  const file = await writeConfig({ api_key: key, ...(keptBaseURL ? { base_url: keptBaseURL } : {}) }, env);
  io.stderr.write(`Key saved to ${file} (mode 0600); balance ${balance.credits} credits.\n`);
  return 0;
}
