import type { Client } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';

/**
 * The admin command line: what the companion web app does to accounts, keys
 * and credits, for development and support. Each command returns a JSON-able
 * result and the lines a person reads.
 */
export interface CommandResult {
  json: unknown;
  text: string[];
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A command that cannot do what it was asked, said in one line (exit code 1, `code` under --json). */
export class CommandRefused extends Error {
  override readonly name = 'CommandRefused';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What commands work with: the database, and Temporal for the support commands. */
export interface AdminContext {
  db: CommonQueryMethods;
  /** Connects on first use: only the support commands need it. */
  temporal: () => Promise<Client>;
  /** The generations' task queue (TEMPORAL_TASK_QUEUE): where a webhook redelivery's workflow runs when none is open. */
  taskQueue?: string;
  /** The account console's base URL, for sign-in links (default http://127.0.0.1:8082). */
  consoleUrl?: string;
}

export interface Command {
  summary: string;
  usage: string;
  options: Record<string, { type: 'string' | 'boolean'; required?: boolean }>;
  /** Names of the arguments that follow the command, all required (`import-catalog FILE`). */
  arguments?: string[];
  run(
    context: AdminContext,
    values: Record<string, string | boolean | undefined>,
    args: string[],
  ): Promise<CommandResult>;
}

export const str = (v: string | boolean | undefined): string => String(v);
export const optional = (v: string | boolean | undefined): string | undefined =>
  typeof v === 'string' ? v : undefined;

export function positiveInt(v: string | boolean | undefined, name: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`--${name} must be a positive whole number.`);
  return n;
}

export function oneOf<T extends string>(
  v: string | boolean | undefined,
  allowed: readonly T[],
  name: string,
): T {
  if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
  throw new UsageError(`--${name} must be one of ${allowed.join(', ')}.`);
}
