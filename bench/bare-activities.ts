import { sleep } from '@temporalio/activity';

export function noop(): Promise<string> {
  return Promise.resolve('ok');
}

/** Waits, as a generation's wait for a slow provider does, until the worker stops. */
export async function park(): Promise<string> {
  await sleep('1 hour');
  return 'done';
}
