import { ApplicationFailure } from '@temporalio/activity';
import {
  BackendTerminatedError,
  ConnectionError,
  DataIntegrityError,
  NotFoundError,
  SchemaValidationError,
  StatementTimeoutError,
} from 'slonik';
import { PermanentError } from '../errors.js';
import { errorTypes } from '../workflows/generation-types.js';

/**
 * How an activity failure is told apart: whether another attempt could succeed. The workflow's
 * retry policies name the types that cannot (`errorTypes.permanent`, `errorTypes.invalidInput`),
 * and every step has a horizon for the ones that keep failing anyway.
 */

/** Socket errors, and PostgreSQL's connection-exception (08), operator-intervention (57P) and resource (53) classes. */
const dependencyCodes =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|08...|57P0[1-4]|53...)$/;
const sqlState = /^[0-9A-Z]{5}$/;

/** The errors along an error's cause chain, outermost first. */
function* causeChain(error: unknown): Generator<unknown> {
  for (let e: unknown = error, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++)
    yield e;
}

/** The SQLSTATE of a PostgreSQL error anywhere in the cause chain (slonik wraps pg's errors). */
export function sqlStateOf(error: unknown): string | undefined {
  for (const e of causeChain(error)) {
    const { code } = e as { code?: unknown };
    if (typeof code === 'string' && sqlState.test(code)) return code;
  }
  return undefined;
}

/** A dependency (PostgreSQL, a socket) is unreachable or overloaded: the same call may work later. */
export function isDependencyFailure(error: unknown): boolean {
  for (const e of causeChain(error)) {
    if (
      e instanceof ConnectionError ||
      e instanceof BackendTerminatedError ||
      e instanceof StatementTimeoutError
    )
      return true;
    const { code } = e as { code?: unknown };
    if (typeof code === 'string' && dependencyCodes.test(code)) return true;
  }
  return false;
}

/**
 * The failure an activity should report for `error`: ours as they are; data PostgreSQL refuses
 * (class 22) as invalid input; a bug or a broken invariant (integrity other than a unique race,
 * syntax or undefined objects, our functions' own RAISE, a row that does not match its schema, a
 * missing row) as permanent;
 * an unreachable dependency as such (retried); anything else unchanged (retried until the step's
 * horizon).
 */
export function classifyFailure(error: unknown): unknown {
  if (error instanceof ApplicationFailure) return error;
  const failure = (type: string) =>
    ApplicationFailure.create({
      type,
      message: error instanceof Error ? error.message : String(error),
      cause: error instanceof Error ? error : undefined,
    });
  if (error instanceof PermanentError) return failure(errorTypes.permanent);
  if (isDependencyFailure(error)) return failure(errorTypes.dependencyUnavailable);
  const state = sqlStateOf(error);
  if (state?.startsWith('22')) return failure(errorTypes.invalidInput);
  if (state && /^(23(?!505)|42|0A|2B|39|3F|P0)/.test(state)) return failure(errorTypes.permanent);
  if (
    error instanceof SchemaValidationError ||
    error instanceof DataIntegrityError ||
    error instanceof NotFoundError
  )
    return failure(errorTypes.permanent);
  return error;
}
