import { apiSettings } from './api.js';
import { batchSettings } from './batches.js';
import { consoleSettings } from './console.js';
import { databaseSettings } from './database.js';
import { generationSettings, retentionSettings } from './generations.js';
import { launcherSettings } from './launcher.js';
import { observabilitySettings } from './observability.js';
import { providerSettings } from './providers.js';
import { storageSettings } from './storage.js';
import { temporalSecuritySettings, temporalSettings } from './temporal.js';
import { webhookSettings } from './webhooks.js';
import { workerSettings } from './worker.js';

/** The service's settings, by concern, in the order docs/configuration.md lists them. */
export const serviceSettingGroups = [
  databaseSettings,
  temporalSettings,
  temporalSecuritySettings,
  apiSettings,
  generationSettings,
  batchSettings,
  retentionSettings,
  workerSettings,
  providerSettings,
  webhookSettings,
  storageSettings,
  consoleSettings,
  observabilitySettings,
] as const;

/** Every group, `npm start`'s own last. */
export const allSettingGroups = [...serviceSettingGroups, launcherSettings] as const;

/** The one schema `npm run api|worker|result-host` parse. */
export const serviceShape = {
  ...databaseSettings.shape,
  ...temporalSettings.shape,
  ...temporalSecuritySettings.shape,
  ...apiSettings.shape,
  ...generationSettings.shape,
  ...batchSettings.shape,
  ...retentionSettings.shape,
  ...workerSettings.shape,
  ...providerSettings.shape,
  ...webhookSettings.shape,
  ...storageSettings.shape,
  ...consoleSettings.shape,
  ...observabilitySettings.shape,
};
