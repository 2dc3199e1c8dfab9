/** One scrape of a Prometheus endpoint, in the text exposition format, parsed into its samples. */
export interface Scrape {
  /** Every sample as written: name, labels, value. */
  samples: Array<{ name: string; labels: Record<string, string>; value: number }>;
  /** The value of the series with exactly these labels; 0 when it is absent (a counter not yet moved). */
  value(name: string, labels?: Record<string, string>): number;
  /** The metric families the endpoint declares (its # TYPE lines). */
  families: Set<string>;
}

const sampleLine = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const labelPair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseScrape(text: string): Scrape {
  const samples: Scrape['samples'] = [];
  const families = new Set<string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) families.add(line.split(' ')[2]!);
    if (line === '' || line.startsWith('#')) continue;
    const match = sampleLine.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (match[2] ?? '').matchAll(labelPair))
      labels[key!] = raw!.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  const same = (a: Record<string, string>, b: Record<string, string>) =>
    Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
  return {
    samples,
    families,
    value: (name, labels = {}) => samples.find((s) => s.name === name && same(s.labels, labels))?.value ?? 0,
  };
}

/** GET {origin}/metrics, parsed; fails on anything but a 200. */
export async function scrape(origin: string): Promise<Scrape> {
  const response = await fetch(`${origin}/metrics`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${origin}/metrics: ${response.status} ${text}`);
  return parseScrape(text);
}
