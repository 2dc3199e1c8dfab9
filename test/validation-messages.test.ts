import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CatalogFileRefused, parseCatalogFile } from '../src/catalog/catalog-file.js';
import { defaultCatalog } from '../src/catalog/default-catalog.js';
import { buildRequestJsonSchema } from '../src/catalog/request-schema.js';
import {
  loadAdminConfig,
  loadConfig,
  loadLauncherConfig,
  loadMigrateConfig,
} from '../src/config/service-config.js';

/**
 * What an operator reads when a setting or a catalog file is wrong, and the JSON Schema each model
 * publishes, snapshotted byte for byte: the words come from zod's messages and issues, and a
 * library upgrade must not change them. A deliberate change updates the snapshot in its own commit.
 */

const base = { DATABASE_URL: 'postgres://u:p@db:5432/app', TEMPORAL_ADDRESS: 'temporal:7233' };

const configCases: Array<[name: string, env: Record<string, string>]> = [
  ['nothing set', {}],
  ['DATABASE_URL not postgres', { ...base, DATABASE_URL: 'mysql://x' }],
  ['TEMPORAL_ADDRESS empty', { ...base, TEMPORAL_ADDRESS: '' }],
  ['an integer that is a word', { ...base, API_PORT: 'eighty' }],
  ['an integer that is a fraction', { ...base, API_PORT: '80.5' }],
  ['an integer below its minimum', { ...base, DATABASE_POOL_SIZE: '0', CATALOG_REFRESH_MS: '5' }],
  ['a port above 65535', { ...base, METRICS_PORT: '70000', WORKER_HEALTH_PORT: '0' }],
  ['a port that is a word', { ...base, RESULT_METRICS_PORT: 'x' }],
  ['an empty namespace', { ...base, TEMPORAL_NAMESPACE: '', TEMPORAL_TASK_QUEUE: '' }],
  ['URLs that are not', { ...base, API_PUBLIC_URL: 'not a url', RESULT_BASE_URL: 'x', FAL_QUEUE_URL: '::' }],
  ['OTLP endpoint not a URL', { ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }],
  ['TRUST_PROXY true', { ...base, TRUST_PROXY: 'true' }],
  ['TRUST_PROXY bad entries', { ...base, TRUST_PROXY: '10.0.0.0/8, nope, 999.1.1.1' }],
  ['TEMPORAL_TLS not a boolean', { ...base, TEMPORAL_TLS: 'yes' }],
  ['TEMPORAL_TLS_SERVER_NAME blank', { ...base, TEMPORAL_TLS_SERVER_NAME: '   ' }],
  ['TEMPORAL_TLS_CA not PEM nor a file', { ...base, TEMPORAL_TLS_CA: '/no/such/ca.pem' }],
  ['half an mTLS pair', { ...base, TEMPORAL_TLS_CERT: '-----BEGIN CERTIFICATE-----\\nx' }],
  ['LOG_LEVEL unknown', { ...base, LOG_LEVEL: 'verbose' }],
  ['OUTBOUND_ALLOW_CIDRS bad', { ...base, OUTBOUND_ALLOW_CIDRS: '10.0.0.0/33' }],
  ['STORAGE_URL bad', { ...base, STORAGE_URL: 'ftp://x' }],
  ['STORAGE_URL bad bucket', { ...base, STORAGE_URL: 's3://A_B' }],
  ['S3_ENDPOINT bad', { ...base, S3_ENDPOINT: 'minio:9000' }],
  ['S3_FORCE_PATH_STYLE bad', { ...base, S3_FORCE_PATH_STYLE: 'yes' }],
  ['REDIS_URL bad', { ...base, REDIS_URL: 'http://redis' }],
  ['headers timeout beyond the request timeout', { ...base, API_HEADERS_TIMEOUT_MS: '70000' }],
  [
    'many at once',
    { DATABASE_URL: 'mysql://x', API_PORT: 'eighty', TRUST_PROXY: 'maybe', LOG_LEVEL: 'loud' },
  ],
];

function refusal(load: () => unknown): string {
  try {
    load();
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
  return 'accepted';
}

/** The example simulated model, to break in one place at a time. */
const sketch = () =>
  structuredClone(
    (JSON.parse(readFileSync('catalog/examples/simulated.json', 'utf8')) as { models: [any] }).models[0],
  );

function catalogCases(): Array<[string, string]> {
  const cases: Array<[string, string]> = [
    ['not JSON', '{'],
    ['not an object', '[]'],
    ['models missing', '{}'],
    ['models not an array', '{"models": 3}'],
    ['an unknown top-level field', '{"models": [], "extra": 1}'],
  ];
  const each = (name: string, change: (m: any) => unknown) => {
    const model = sketch();
    change(model);
    cases.push([name, JSON.stringify({ models: [model] })]);
  };
  each('id bad', (m) => (m.id = 'Bad Id'));
  each('id a number', (m) => (m.id = 5));
  each('sort_order a fraction', (m) => (m.sort_order = 1.5));
  each('sort_order too big', (m) => (m.sort_order = 2 ** 40));
  each('sort_order too small', (m) => (m.sort_order = -(2 ** 40)));
  each('active a string', (m) => (m.active = 'yes'));
  each('definition not an object', (m) => (m.definition = []));
  each('definition missing', (m) => delete m.definition);
  each('name empty', (m) => (m.definition.name = ''));
  each('prompt lengths', (m) => (m.definition.prompt = { min_length: 0, max_length: 'x' }));
  each('max_images negative', (m) => (m.definition.max_images = -1));
  each('unknown_fields bad', (m) => (m.definition.unknown_fields = 'drop'));
  each('option type bad', (m) => (m.definition.options.size.type = 'choice'));
  each('option type missing', (m) => delete m.definition.options.size.type);
  each('option not an object', (m) => (m.definition.options.size = 'small'));
  each('enum values empty', (m) => (m.definition.options.size.values = []));
  each('enum value empty', (m) => (m.definition.options.size.values = ['', 'large']));
  each('enum default not a value', (m) => (m.definition.options.size.default = 'medium'));
  each('descriptions not strings', (m) => (m.definition.options.size.descriptions = { small: 1 }));
  each('integer option', (m) => {
    m.definition.options.steps = { type: 'integer_enum', values: [0, 2.5], default: 'x', description: 'd' };
  });
  each('boolean option default', (m) => {
    m.definition.options.hd = { type: 'boolean', default: 'true', description: 'd' };
  });
  each('image option requires', (m) => {
    m.definition.options.ref = { type: 'image', requires: 'size', description: 'd' };
  });
  each('pricing by not an enum', (m) => (m.definition.pricing.by = 'nothing'));
  each('pricing flat without *', (m) => {
    m.definition.pricing.by = null;
  });
  each('pricing unit second without duration', (m) => (m.definition.pricing.unit = 'second'));
  each('pricing unit bad', (m) => (m.definition.pricing.unit = 'minute'));
  each('pricing credits negative', (m) => (m.definition.pricing.credits.small = -1));
  each('surcharges of no option', (m) => (m.definition.pricing.surcharges = { turbo: { true: 1 } }));
  each('output_size bad', (m) => (m.definition.output_size = { by: 'size', long_edge_px: { small: 0 } }));
  each('provider unknown', (m) => (m.definition.provider.name = 'acme'));
  each('provider model empty', (m) => (m.definition.provider.model = ''));
  each('provider version on fal', (m) => {
    m.definition.provider = { name: 'fal', model: 'x', version: 'v', input: {} };
  });
  each('provider input mapping', (m) => {
    m.definition.provider = {
      name: 'fal',
      model: 'x',
      input: {
        a: { from: 'nothing' },
        b: { from: [] },
        c: { value: 1, from: 'size' },
        d: { from: 'size', first: true },
        e: { from: 'size', map: { small: 1 } },
        f: {},
        g: 3,
      },
    };
  });
  each('an unknown definition field', (m) => (m.definition.output_sise = 1));
  const twice = sketch();
  cases.push(['the same id twice', JSON.stringify({ models: [twice, twice] })]);
  cases.push(['a model that is not an object', JSON.stringify({ models: ['a model', {}, null] })]);
  return cases;
}

describe('validation messages that library upgrades must leave byte-identical', () => {
  it('configuration: each bad setting as the operator reads it', async () => {
    const lines = configCases.map(([name, env]) => `## ${name}\n${refusal(() => loadConfig(env))}\n`);
    lines.push(`## launcher: bad port\n${refusal(() => loadLauncherConfig({ TEMPORAL_DEV_PORT: 'x' }))}\n`);
    lines.push(`## admin: bad TLS\n${refusal(() => loadAdminConfig({ TEMPORAL_TLS: '1' }))}\n`);
    lines.push(`## migrate: nothing set\n${refusal(() => loadMigrateConfig({}))}\n`);
    await expect(lines.join('\n')).toMatchFileSnapshot('__snapshots__/messages/config.txt');
  });

  it('catalog files: each problem as the operator reads it', async () => {
    const lines = catalogCases().map(([name, text]) => {
      let message = 'accepted';
      try {
        parseCatalogFile(text, 'test.json');
      } catch (error) {
        if (!(error instanceof CatalogFileRefused)) throw error;
        message = error.message;
      }
      return `## ${name}\n${message}\n`;
    });
    await expect(lines.join('\n')).toMatchFileSnapshot('__snapshots__/messages/catalog-files.txt');
  });

  it('the request JSON Schema of each default and example model, as buildRequestJsonSchema makes it', async () => {
    const examples = ['fal', 'openai', 'replicate', 'simulated'].flatMap((name) =>
      parseCatalogFile(readFileSync(`catalog/examples/${name}.json`, 'utf8'), name),
    );
    const schemas = Object.fromEntries(
      [...defaultCatalog, ...examples].map((m) => [
        m.id,
        buildRequestJsonSchema({ id: m.id, ...m.definition }),
      ]),
    );
    await expect(`${JSON.stringify(schemas, null, 2)}\n`).toMatchFileSnapshot(
      '__snapshots__/messages/request-json-schemas.json',
    );
  });
});
