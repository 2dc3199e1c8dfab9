import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { CatalogFileRefused, parseCatalogFile } from '../catalog/catalog-file.js';
import { importCatalog } from '../catalog/catalog-import.js';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { routesOf } from '../catalog/routes.js';
import { providerCredentialVariables } from '../config/service-config.js';
import type { Command } from './command.js';

/** The operator's catalog commands: models come from files kept with the code (catalog/examples/). */
export const catalogCommands: Record<string, Command> = {
  'import-catalog': {
    summary:
      'Check a catalog file and apply it in one transaction: new models added, listed ones updated; models not in the file are left as they are. Any problem: nothing applied.',
    usage: 'FILE',
    options: {},
    arguments: ['FILE'],
    async run({ db }, _values, [file]) {
      const path = file!;
      const models = parseCatalogFile(await readCatalogFile(path), path);
      const summary = await importCatalog(db, path, models);
      const line = (label: string, ids: string[]) => (ids.length ? [`  ${label} ${ids.join(', ')}`] : []);
      const providers = new Set(models.flatMap((m) => routesOf(m.definition).map((route) => route.provider)));
      const credentials = [...providers].flatMap((name: ProviderName) => {
        const variable = providerCredentialVariables[name];
        return variable ? [`${name} models are offered only by API processes with ${variable} set.`] : [];
      });
      return {
        json: summary,
        text: [
          `Imported ${path}: ${summary.added.length} added, ${summary.updated.length} updated, ${summary.unchanged.length} unchanged.`,
          ...line('added:    ', summary.added),
          ...line('updated:  ', summary.updated),
          ...line('unchanged:', summary.unchanged),
          'Models not in the file are left as they are. Running API processes pick up the change at once.',
          ...credentials,
        ],
      };
    },
  },
};

/**
 * The file's text. A relative path is taken from the folder `npm run admin` was started in
 * (INIT_CWD; npm itself runs scripts from the project folder).
 */
async function readCatalogFile(path: string): Promise<string> {
  try {
    return await readFile(resolve(process.env.INIT_CWD ?? process.cwd(), path), 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'a folder, not a file'
          : code === 'EACCES'
            ? 'not readable (permission denied)'
            : (error as Error).message;
    throw new CatalogFileRefused(path, [`cannot read the file: ${reason}`]);
  }
}
