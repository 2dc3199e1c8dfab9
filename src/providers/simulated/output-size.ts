// Sizes of the simulated provider's outputs: plain arithmetic, no image library, so the worker can use it
// without loading one.

/** Width and height for a long edge and an aspect ratio such as `16:9` (`auto`: square); both even. */
export function outputSize(
  longEdgePx: number,
  aspectRatio: string | undefined,
): { width: number; height: number } {
  const match = /^(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(aspectRatio ?? '');
  const [w, h] = match ? [Number(match[1]), Number(match[2])] : [1, 1];
  const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);
  return w >= h
    ? { width: even(longEdgePx), height: even((longEdgePx * h) / w) }
    : { width: even((longEdgePx * w) / h), height: even(longEdgePx) };
}
