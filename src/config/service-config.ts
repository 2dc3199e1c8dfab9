import { z } from 'zod';
import { serviceShape } from './groups.js';
import { launcherSettings } from './launcher.js';
import { ConfigError, parseEnv } from './setting.js';
import { checkTemporalSecurity, temporalSecuritySettings, type TemporalSecurity } from './temporal.js';

/**
 * The whole service is configured by environment variables, parsed here once. The variables are
 * declared by concern in src/config/ (each with its meaning and the processes that read it, from
 * which docs/configuration.md is generated); this file puts together what each process reads.
 * Production entry points (`npm run api|worker|result-host`) read the whole schema; the development
 * launcher (`npm start`) fills in DATABASE_URL and TEMPORAL_ADDRESS for the embedded servers it starts.
 */
export { ConfigError } from './setting.js';
export type { TrustProxy } from './api.js';
export { stepHorizons } from './generations.js';
export {
  inFlightCaps,
  providerCredentialVariables,
  providersWithCredentials,
  requestBudgets,
} from './providers.js';
export { storageLocation } from './storage.js';
export { webhookResolverOf } from './webhooks.js';

const configSchema = z.object(serviceShape);

export type Config = Omit<
  z.infer<typeof configSchema>,
  'API_PUBLIC_URL' | 'RESULT_BASE_URL' | 'CONSOLE_PUBLIC_URL'
> & {
  API_PUBLIC_URL: string;
  RESULT_BASE_URL: string;
  CONSOLE_PUBLIC_URL: string;
};

/** Parses the environment; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const c = parseEnv(configSchema, env);
  checkTemporalSecurity(c);
  if (c.API_HEADERS_TIMEOUT_MS > c.API_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      'Invalid configuration:\n  API_HEADERS_TIMEOUT_MS: must not exceed API_REQUEST_TIMEOUT_MS (the headers are part of the request)',
    );
  }
  const apiHost = c.API_HOST === '0.0.0.0' ? '127.0.0.1' : c.API_HOST;
  const resultHost = c.RESULT_HOST === '0.0.0.0' ? '127.0.0.1' : c.RESULT_HOST;
  const consoleHost = c.CONSOLE_HOST === '0.0.0.0' ? '127.0.0.1' : c.CONSOLE_HOST;
  return {
    ...c,
    API_PUBLIC_URL: (c.API_PUBLIC_URL ?? `http://${apiHost}:${c.API_PORT}/v1`).replace(/\/$/, ''),
    RESULT_BASE_URL: (c.RESULT_BASE_URL ?? `http://${resultHost}:${c.RESULT_PORT}`).replace(/\/$/, ''),
    CONSOLE_PUBLIC_URL: (c.CONSOLE_PUBLIC_URL ?? `http://${consoleHost}:${c.CONSOLE_PORT}`).replace(
      /\/$/,
      '',
    ),
  };
}

/**
 * `npm start`'s own settings, read before it has filled in the service's configuration: its data
 * folder, and the ports and namespace of the embedded servers it runs.
 */
const launcherSchema = configSchema.pick({ TEMPORAL_NAMESPACE: true }).extend(launcherSettings.shape);
type LauncherConfig = z.infer<typeof launcherSchema>;

export function loadLauncherConfig(env: NodeJS.ProcessEnv = process.env): LauncherConfig {
  return parseEnv(launcherSchema, env);
}

/**
 * What `npm run admin` reads. Without DATABASE_URL or TEMPORAL_ADDRESS it uses those of the
 * development service a running `npm start` recorded under DATA_DIR.
 */
const adminSchema = configSchema
  .pick({
    DATABASE_URL: true,
    TEMPORAL_ADDRESS: true,
    TEMPORAL_NAMESPACE: true,
    TEMPORAL_TASK_QUEUE: true,
    CONSOLE_PUBLIC_URL: true,
  })
  .partial({ DATABASE_URL: true, TEMPORAL_ADDRESS: true })
  .extend({ DATA_DIR: launcherSettings.shape.DATA_DIR, ...temporalSecuritySettings.shape });
type AdminConfig = z.infer<typeof adminSchema>;

export function loadAdminConfig(env: NodeJS.ProcessEnv = process.env): AdminConfig {
  return checkTemporalSecurity(parseEnv(adminSchema, env));
}

/** The Temporal security variables alone, checked: for the launcher's look at a Temporal of your own. */
export function loadTemporalSecurity(env: NodeJS.ProcessEnv = process.env): TemporalSecurity {
  return checkTemporalSecurity(parseEnv(z.object(temporalSecuritySettings.shape), env));
}

/** What `npm run migrate` reads: only the database, which it never guesses. */
const migrateSchema = configSchema.pick({ DATABASE_URL: true });

export function loadMigrateConfig(env: NodeJS.ProcessEnv = process.env): z.infer<typeof migrateSchema> {
  return parseEnv(migrateSchema, env);
}
