import { readFile } from 'node:fs/promises';

/** One measured figure against its target, as every run of a bench prints it. */
export interface Target {
  label: string;
  value: number;
  /** 'min': the value must reach the target; 'max': it must stay at or under it. */
  kind: 'min' | 'max';
  target: number;
  /** How the value and target print: a ratio (2 decimals, ×), milliseconds, megabytes or a count. */
  unit: 'ratio' | 'ms' | 'MB' | 'count';
  /** What the value is made of, printed beside it (the per-process figures behind a ratio). */
  detail?: string;
}

/** Prints each target as met or missed, with how far off a miss is; returns whether all were met. */
export function printTargets(title: string, targets: Target[]): boolean {
  console.log(`\n${title}`);
  const format = (n: number, unit: Target['unit']) =>
    unit === 'ratio'
      ? `${n.toFixed(2)}×`
      : unit === 'count'
        ? String(Number.isInteger(n) ? n : Number(n.toFixed(2)))
        : `${n.toFixed(1)} ${unit}`;
  let all = true;
  for (const t of targets) {
    const met = t.kind === 'min' ? t.value >= t.target : t.value <= t.target;
    all &&= met;
    const sign = t.kind === 'min' ? '≥' : '≤';
    const miss = met ? '' : ` (off by ${format(Math.abs(t.value - t.target), t.unit)})`;
    console.log(
      `  ${met ? 'met   ' : 'MISSED'} ${t.label}: ${format(t.value, t.unit)}, target ${sign} ${format(t.target, t.unit)}${miss}${t.detail ? `  [${t.detail}]` : ''}`,
    );
  }
  return all;
}

/** The machine's load average (1, 5, 15 min) from /proc/loadavg, for the run's header and footer. */
export async function loadAverage(): Promise<string> {
  return (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
}
