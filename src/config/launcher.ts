import path from 'node:path';
import { z } from 'zod';
import { projectRoot } from './project-root.js';
import { int, settingGroup } from './setting.js';

/** `npm start`'s own settings: its data folder and the ports of the embedded servers it runs. */
export const launcherSettings = settingGroup({
  title: '`npm start` (development)',
  shape: {
    DATA_DIR: z
      .string()
      .optional()
      .transform((dir) => path.resolve(dir ?? path.join(projectRoot, '.data'))),
    EMBEDDED_POSTGRES_PORT: int(54329),
    TEMPORAL_DEV_PORT: int(7233),
    TEMPORAL_UI_PORT: int(8233),
  },
  docs: {
    DATA_DIR: {
      readBy: ['start', 'admin'],
      text: 'Where `npm start` keeps the embedded servers’ data and the addresses local commands (`npm run admin`) read.',
      default: '`.data` in the project',
    },
    EMBEDDED_POSTGRES_PORT: { readBy: ['start'], text: 'The embedded PostgreSQL’s port.' },
    TEMPORAL_DEV_PORT: { readBy: ['start'], text: 'The Temporal dev server’s frontend port.' },
    TEMPORAL_UI_PORT: { readBy: ['start'], text: 'The Temporal dev server’s web UI port.' },
  },
});
