import { writeFile } from 'node:fs/promises';
import { configReferencePath, renderConfigReference } from './config-reference.js';

/** `npm run docs:config`: writes docs/configuration.md from the settings in src/config/. */
await writeFile(configReferencePath, await renderConfigReference());
process.stdout.write(`wrote ${configReferencePath}\n`);
