import type { UsageDay } from '../db/console-reads.js';

/**
 * The overview's two charts as server-made SVG: no script, nothing to load, readable by screen
 * readers (role="img" with a label, and each bar a <title>). Only numbers and our own day labels
 * go into the markup, so nothing needs escaping.
 */

const width = 720;
const height = 180;
const pad = { left: 44, right: 8, top: 12, bottom: 28 };
const outcomeColours = {
  succeeded: '#2f855a',
  failed: '#c53030',
  rejected: '#b7791f',
  queued: '#3182ce',
} as const;

export function creditsChart(days: UsageDay[]): string {
  const values = days.map((d) => Math.max(0, d.credits));
  return barChart(
    days,
    values.map((v) => [{ value: v, colour: '#4c51bf', label: `${v} credits` }]),
    `Credits spent per day, last ${days.length} days`,
  );
}

export function outcomesChart(days: UsageDay[]): string {
  return barChart(
    days,
    days.map((d) =>
      (Object.keys(outcomeColours) as Array<keyof typeof outcomeColours>).map((status) => ({
        value: d.outcomes[status],
        colour: outcomeColours[status],
        label: `${d.outcomes[status]} ${status}`,
      })),
    ),
    `Generations per day by outcome, last ${days.length} days`,
  );
}

export const outcomeLegend = Object.entries(outcomeColours).map(([status, colour]) => ({ status, colour }));

function barChart(
  days: UsageDay[],
  stacks: Array<Array<{ value: number; colour: string; label: string }>>,
  caption: string,
): string {
  const totals = stacks.map((s) => s.reduce((sum, part) => sum + part.value, 0));
  const top = niceCeiling(Math.max(1, ...totals));
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const slot = plotW / Math.max(1, days.length);
  const y = (v: number) => pad.top + plotH - (v / top) * plotH;
  const parts: string[] = [];
  for (const tick of [0, top / 2, top]) {
    parts.push(
      `<line x1="${pad.left}" x2="${width - pad.right}" y1="${y(tick)}" y2="${y(tick)}" stroke="#d0d4dc"/>`,
      `<text x="${pad.left - 6}" y="${y(tick) + 4}" text-anchor="end" font-size="11" fill="#4a5160">${tick}</text>`,
    );
  }
  stacks.forEach((stack, i) => {
    const x = pad.left + i * slot + slot * 0.15;
    let base = 0;
    const titles = stack.map((p) => p.label).join(', ');
    for (const part of stack) {
      if (part.value <= 0) continue;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y(base + part.value).toFixed(1)}" width="${(slot * 0.7).toFixed(1)}" height="${(y(base) - y(base + part.value)).toFixed(1)}" fill="${part.colour}"><title>${days[i]!.day}: ${titles}</title></rect>`,
      );
      base += part.value;
    }
    if (i % 5 === days.length % 5 || i === days.length - 1) {
      parts.push(
        `<text x="${(x + slot * 0.35).toFixed(1)}" y="${height - 10}" text-anchor="middle" font-size="11" fill="#4a5160">${days[i]!.day.slice(5)}</text>`,
      );
    }
  });
  return `<svg class="chart" viewBox="0 0 ${width} ${height}" role="img" aria-label="${caption}" xmlns="http://www.w3.org/2000/svg">${parts.join('')}</svg>`;
}

/** 1, 2 or 5 times a power of ten, at least `n`: round axis labels. */
function niceCeiling(n: number): number {
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * power >= n) return step * power;
  return 10 * power;
}
