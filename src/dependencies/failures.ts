import { BackendTerminatedError, ConnectionError, StatementTimeoutError } from 'slonik';

/**
 * Whether an error means a dependency (PostgreSQL, a socket) is unreachable or overloaded, so the
 * same call may work later: the API answers 503 for it, and activities retry it. Shared by both,
 * so they agree on what a passing outage is.
 */

/** Socket errors, and PostgreSQL's connection-exception (08), operator-intervention (57P) and resource (53) classes. */
const dependencyCodes =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|08...|57P0[1-4]|53...)$/;
const sqlState = /^[0-9A-Z]{5}$/;

/** The errors along an error's cause chain, outermost first. */
export function* causeChain(error: unknown): Generator<unknown> {
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
