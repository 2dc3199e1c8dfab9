export function noop(): Promise<string> {
  return Promise.resolve('ok');
}
