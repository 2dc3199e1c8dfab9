import { z } from 'zod';
import { int, requiredError, settingGroup } from './setting.js';

/** PostgreSQL, and how long a starting process waits for its dependencies. */
export const databaseSettings = settingGroup({
  title: 'PostgreSQL',
  shape: {
    DATABASE_URL: z
      .string({ error: requiredError('is required (postgres://user:password@host:port/database)') })
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'),
    DATABASE_POOL_SIZE: int(10, 1),
    DEPENDENCY_WAIT_TIMEOUT_MS: int(5 * 60_000, 0),
  },
  docs: {
    DATABASE_URL: {
      readBy: ['api', 'worker', 'migrate', 'admin', 'start'],
      text: '`postgres://user:password@host:port/database`. Required by `api`, `worker`, `result-host` and `migrate`. Unset, `npm start` runs an embedded PostgreSQL, and `admin` uses the database of the `npm start` running in this folder.',
      default: '(required)',
    },
    DATABASE_POOL_SIZE: { readBy: ['api', 'worker'], text: 'Connections per process.' },
    DEPENDENCY_WAIT_TIMEOUT_MS: {
      readBy: ['api', 'worker'],
      text: 'How long a starting process waits for PostgreSQL (and the worker for Temporal) before it exits 1 for its supervisor to restart it.',
    },
  },
});
