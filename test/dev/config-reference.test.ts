import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { allSettingGroups, serviceShape } from '../../src/config/groups.js';
import { loadConfig } from '../../src/config/service-config.js';
import { configReferencePath, renderConfigReference } from '../../src/dev/config-reference.js';

describe('the configuration reference (docs/configuration.md)', () => {
  it('is what `npm run docs:config` renders from the schema today', async () => {
    const onDisk = await readFile(configReferencePath, 'utf8');
    // On failure: run `npm run docs:config` and commit docs/configuration.md.
    expect(onDisk, 'docs/configuration.md is stale: run npm run docs:config').toBe(
      await renderConfigReference(),
    );
  });

  it('lists every variable the processes parse, each once, with who reads it', async () => {
    const page = await readFile(configReferencePath, 'utf8');
    const parsed = Object.keys(
      loadConfig({ DATABASE_URL: 'postgres://u:p@db/app', TEMPORAL_ADDRESS: 'temporal:7233' }),
    );
    const documented = allSettingGroups.flatMap((group) => Object.keys(group.shape));
    expect(new Set(documented).size).toBe(documented.length);
    for (const name of Object.keys(serviceShape)) expect(documented).toContain(name);
    for (const name of parsed) {
      expect(page).toMatch(new RegExp(`^\\| \`${name}\` +\\|`, 'm'));
    }
    for (const group of allSettingGroups)
      for (const doc of Object.values(group.docs)) {
        expect(doc.readBy.length).toBeGreaterThan(0);
        expect(doc.text.trim()).not.toBe('');
      }
  });

  it('shows the schema’s own defaults', async () => {
    const page = await readFile(configReferencePath, 'utf8');
    expect(page).toMatch(/^\| `RATE_LIMIT_PER_MINUTE` +\| `600` +\|/m);
    expect(page).toMatch(/^\| `IDEMPOTENCY_RETENTION_MS` +\| 15552000000 \(180 days\) +\|/m);
    expect(page).toMatch(/^\| `BODY_LIMIT_BYTES` +\| 33554432 \(32 MiB\) +\|/m);
  });
});
