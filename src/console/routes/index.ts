import type { FastifyInstance } from 'fastify';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { batchRoutes } from './batch-routes.js';
import { galleryRoutes } from './gallery-routes.js';
import { generationRoutes } from './generation-routes.js';
import { healthRoutes } from './health-routes.js';
import { keyRoutes } from './key-routes.js';
import { overviewRoutes } from './overview-routes.js';
import { playgroundRoutes } from './playground-routes.js';
import { requestLogRoutes } from './request-log-routes.js';
import { signInRoutes } from './sign-in-routes.js';
import { webhookRoutes } from './webhook-routes.js';
import { connectedAppsRoutes } from './connected-apps-routes.js';
import { oauthRoutes } from './oauth-routes.js';
import { mountAuthorizationServer } from '../oauth/mount.js';

export function consoleRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  healthRoutes(app, deps);
  signInRoutes(app, deps);
  overviewRoutes(app, deps);
  keyRoutes(app, deps);
  generationRoutes(app, deps);
  batchRoutes(app, deps);
  galleryRoutes(app, deps);
  playgroundRoutes(app, deps);
  requestLogRoutes(app, deps);
  webhookRoutes(app, deps);
  connectedAppsRoutes(app, deps);
  if (deps.oauth) {
    oauthRoutes(app, { ...deps, oauth: deps.oauth });
    mountAuthorizationServer(app, deps.oauth.provider, deps.oauth.issuer, deps.clientSubject);
  }
}
