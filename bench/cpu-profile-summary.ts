import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { printColumns } from './support.js';

/**
 * npx tsx bench/cpu-profile-summary.ts FILE.cpuprofile [TOP]: where a V8 CPU profile (node
 * --cpu-prof, or BENCH_CPU_PROFILE_DIR) spent its samples. Self time by owner (our src/ or dist/
 * file, an npm package, Node's own code, V8's idle/GC/program buckets), then the TOP (default 25)
 * functions by self time, then inclusive time of each of our files (every sample with one of its
 * functions on the stack). The profiler samples wall time on a thread that holds the CPU or waits
 * for it, so on a busy machine read shares, not milliseconds.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Who owns a frame: a package under node_modules, our own file, Node's internals, or V8's buckets. */
function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName || 'anonymous'}`;
  if (url.startsWith('node:')) return 'node: internals';
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + '/node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const ours = /\/(src|dist|bench)\/(.*)$/.exec(url);
  if (ours) return `ours: ${ours[2]}`;
  return path.basename(url);
}

const file = process.argv[2];
if (!file) {
  console.error('usage: npx tsx bench/cpu-profile-summary.ts FILE.cpuprofile [TOP]');
  process.exit(2);
}
const top = Number(process.argv[3] ?? 25);
const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

const selfMs = new Map<number, number>();
profile.samples.forEach((id, i) =>
  selfMs.set(id, (selfMs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000),
);
const totalMs = [...selfMs.values()].reduce((a, b) => a + b, 0);

const add = (map: Map<string, number>, key: string, ms: number) => map.set(key, (map.get(key) ?? 0) + ms);
const byOwner = new Map<string, number>();
const byFunction = new Map<string, number>();
const inclusiveOurs = new Map<string, number>();
for (const [id, ms] of selfMs) {
  const frame = byId.get(id)!.callFrame;
  add(byOwner, ownerOf(frame), ms);
  add(byFunction, `${frame.functionName || '(anonymous)'}  ${ownerOf(frame)}:${frame.lineNumber + 1}`, ms);
  // Each of our files once per sample, however deep it recurs.
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const owner = ownerOf(byId.get(at)!.callFrame);
    if (owner.startsWith('ours: ') && !seen.has(owner)) {
      seen.add(owner);
      add(inclusiveOurs, owner, ms);
    }
  }
}

const print = (title: string, map: Map<string, number>, limit: number) => {
  console.log(`\n${title}`);
  printColumns(90, [
    ['', 'ms', 'share'],
    ...[...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([key, ms]) => [key.slice(0, 88), ms.toFixed(0), `${((100 * ms) / totalMs).toFixed(1)}%`]),
  ]);
};
console.log(`${file}: ${totalMs.toFixed(0)} ms sampled over ${profile.samples.length} samples`);
print('self time by owner', byOwner, top);
print(`top ${top} functions by self time`, byFunction, top);
print('inclusive time of our files', inclusiveOurs, top);
