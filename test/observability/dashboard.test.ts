import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, metricNames } from '../../src/observability/metrics.js';
import { temporalSdkMetricNames } from '../../src/worker/temporal-runtime.js';

const read = (file: string) => readFile(new URL(`../../${file}`, import.meta.url), 'utf8');

interface Panel {
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: Array<{ expr: string }>;
}

/**
 * The metric names a PromQL expression reads: what is left once strings, label matchers, ranges and
 * grouping label lists are taken out, and functions, aggregations and keywords are set aside.
 */
function metricsIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const keywords = new Set(['by', 'without', 'and', 'or', 'unless', 'bool', 'offset', 'on', 'ignoring']);
  return [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)]
    .filter(
      (m) =>
        !bare
          .slice(m.index + m[0].length)
          .trimStart()
          .startsWith('('),
    )
    .map((m) => m[0])
    .filter((name) => !keywords.has(name));
}

/**
 * The Grafana dashboard reads only metrics our processes serve (ours, Node's defaults that every
 * registry collects, and the Temporal SDK metrics the metrics test finds on a real worker), from
 * the provisioned data source and the jobs Prometheus scrapes; and it shows every metric we define.
 */
describe('the Grafana dashboard', async () => {
  const dashboard = JSON.parse(await read('deploy/grafana/dashboards/generation-service.json')) as {
    uid: string;
    panels: Panel[];
  };
  const panels = dashboard.panels.filter((p) => p.type !== 'row');
  const exprs = panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

  it('queries only metric names our code registers', async () => {
    const defaults = (await createMetricsRegistry().getMetricsAsJSON()).map((m) => m.name);
    const known = new Set<string>([...Object.values(metricNames), ...temporalSdkMetricNames, ...defaults]);
    const unknown = exprs
      .flatMap(metricsIn)
      .filter((name) => !known.has(name) && !known.has(name.replace(/_(bucket|count|sum)$/, '')));
    expect(unknown).toEqual([]);
    expect(exprs.length).toBeGreaterThan(30);
  });

  it('shows every metric we define', () => {
    const used = new Set(exprs.flatMap(metricsIn).map((name) => name.replace(/_(bucket|count|sum)$/, '')));
    expect(Object.values(metricNames).filter((name) => !used.has(name))).toEqual([]);
    expect(temporalSdkMetricNames.filter((name) => !used.has(name))).toEqual([]);
  });

  it('reads the provisioned data source, and only jobs Prometheus scrapes', async () => {
    const datasource = await read('deploy/grafana/provisioning/datasources/prometheus.yml');
    const uid = /^\s*uid:\s*(\S+)/m.exec(datasource)?.[1];
    for (const panel of panels) expect(panel.datasource?.uid, panel.title).toBe(uid);
    const scraped = [...(await read('deploy/prometheus/prometheus.yml')).matchAll(/job_name:\s*(\S+)/g)].map(
      (m) => m[1],
    );
    const jobs = exprs.flatMap((expr) => [...expr.matchAll(/job="([^"]+)"/g)].map((m) => m[1]));
    expect(jobs.length).toBeGreaterThan(0);
    expect(jobs.filter((job) => !scraped.includes(job))).toEqual([]);
  });

  it('finds metric names in PromQL the way Prometheus reads it', () => {
    expect(
      metricsIn(
        'histogram_quantile(0.95, sum by (le, route) (rate(http_request_duration_seconds_bucket{job="api",route=~"/v1/.*"}[5m]))) / on (route) foo_total',
      ),
    ).toEqual(['http_request_duration_seconds_bucket', 'foo_total']);
  });
});
