import { readFile } from 'node:fs/promises';
import { printColumns } from './support.js';

/**
 * npx tsx bench/heap-summary.ts BEFORE.heapsnapshot AFTER.heapsnapshot [TOP]: what grew between
 * two heap snapshots of one isolate, by constructor (V8's node type and name): count and shallow
 * size of each in both, the TOP (default 25) largest growths first. With one file, its largest
 * constructors. bench:idle writes the snapshots (BENCH_HEAP_SNAPSHOT_DIR).
 */

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

type Totals = Map<string, { count: number; bytes: number }>;

async function byConstructor(file: string): Promise<Totals> {
  const data = JSON.parse(await readFile(file, 'utf8')) as Snapshot;
  const fields = data.snapshot.meta.node_fields;
  const types = data.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const totals: Totals = new Map();
  for (let i = 0; i < data.nodes.length; i += fields.length) {
    const type = types[data.nodes[i + typeAt!]!]!;
    // Strings and code are grouped by type; objects and closures by their constructor's name.
    const key = ['object', 'closure', 'native'].includes(type)
      ? `${type} ${data.strings[data.nodes[i + nameAt!]!]!.slice(0, 60)}`
      : `(${type})`;
    const entry = totals.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += data.nodes[i + sizeAt!]!;
    totals.set(key, entry);
  }
  return totals;
}

const args = process.argv.slice(2);
const top = /^\d+$/.test(args.at(-1) ?? '') ? args.pop()! : '25';
const [beforeFile, afterFile] = args;
if (!beforeFile) {
  console.error('usage: tsx bench/heap-summary.ts BEFORE.heapsnapshot [AFTER.heapsnapshot] [TOP]');
  process.exit(2);
}
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(2);
const before = await byConstructor(beforeFile);
const sum = (totals: Totals) => [...totals.values()].reduce((n, e) => n + e.bytes, 0);
if (!afterFile) {
  console.log(`${beforeFile}: ${mb(sum(before))} MB in all`);
  printColumns(70, [
    ['constructor', 'count', 'MB'],
    ...[...before.entries()]
      .sort((a, b) => b[1].bytes - a[1].bytes)
      .slice(0, Number(top))
      .map(([key, e]) => [key, String(e.count), mb(e.bytes)]),
  ]);
} else {
  const after = await byConstructor(afterFile);
  console.log(`${mb(sum(before))} MB → ${mb(sum(after))} MB (shallow sizes of every node)`);
  const keys = new Set([...before.keys(), ...after.keys()]);
  const rows = [...keys].map((key) => {
    const b = before.get(key) ?? { count: 0, bytes: 0 };
    const a = after.get(key) ?? { count: 0, bytes: 0 };
    return { key, b, a, grew: a.bytes - b.bytes };
  });
  printColumns(70, [
    ['constructor', 'count', '→ count', 'MB', '→ MB', 'grew MB'],
    ...rows
      .sort((x, y) => y.grew - x.grew)
      .slice(0, Number(top))
      .map((r) => [r.key, String(r.b.count), String(r.a.count), mb(r.b.bytes), mb(r.a.bytes), mb(r.grew)]),
  ]);
}
