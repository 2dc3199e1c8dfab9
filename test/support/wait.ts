/** Polls `probe` every 50 ms until it gives a truthy value, which it returns; throws after `timeoutMs`. */
export async function waitFor<T>(probe: () => Promise<T | null | false>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
