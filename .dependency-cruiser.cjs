// @ts-check
/**
 * The house plan of src/: every room sits on a floor, and a file may import only from its own room
 * or from rooms on lower floors. No arrow runs up a floor or sideways between rooms on one floor,
 * so no two folders can ever form a loop. `npm run lint:deps` checks it (part of `npm run lint`);
 * `npm run deps:graph` draws it.
 *
 * Top to bottom:
 *   dev         the local launcher (`npm start`): embedded PostgreSQL, the Temporal dev server
 *   admin       the support and operator CLI (`npm run admin`)
 *   console     the account console process: pages on the API's repositories and admission path
 *   api, worker, result-host   the processes: composition and HTTP
 *   mcp         the MCP server the API serves at /v1/mcp: tools over admission and the reads, tasks
 *               that are generations; the API's route hands it what it acts through
 *   batches, generations       src/generations/batches/: a batch's creation (its lines checked and
 *               staged), start and cancel; src/generations/: what a door does to a generation once
 *               admitted (cancel, list, redeliver a webhook)
 *   admission   src/generations/admission/: the front door's check as the API, MCP, the console and
 *               batch lines share it: the request's checks, the start, the key's answers, refusals;
 *               one admitGeneration each front door wraps, wired once per process (wireAdmission)
 *   runtime     src/config/ (service-config.ts: reading the environment; the settings by concern)
 *               and src/process/ (lifecycle, logger, what a running npm start tells local commands)
 *   activities, temporal       the workflow's I/O; Temporal client-side set-up (schedules, search attributes)
 *   providers   the provider interface and each adapter (simulated/, and the real ones)
 *   catalog, auth              models, prices and request schemas; API keys
 *   db, workflows              PostgreSQL repositories; the deterministic workflow code
 *   validation, net, storage, media, observability   zod's messages, storable text and JSON Schema;
 *               HTTP in and out (the outbound fetcher and its address policy, webhook targets; what
 *               the servers share: closing unused connections); result storage; measuring media
 *               (ffmpeg); metrics and tracing
 *   vocabulary, dependencies, caches   a generation's words, error codes, ids; PostgreSQL, Temporal
 *               and Redis as dependencies (readiness, passing outages, the wait at start, a Redis
 *               that fails open to memory); in-process caches
 */

/** Rooms, lowest floor first; rooms in one inner array share a floor. */
const floors = [
  [
    { name: 'vocabulary', path: '^src/vocabulary/' },
    { name: 'dependencies', path: '^src/dependencies/' },
    { name: 'caches', path: '^src/caches/' },
  ],
  [
    { name: 'validation', path: '^src/validation/' },
    { name: 'net', path: '^src/net/' },
    { name: 'storage', path: '^src/storage/' },
    { name: 'media', path: '^src/media/' },
    { name: 'observability', path: '^src/observability/' },
  ],
  [
    { name: 'db', path: '^src/db/' },
    { name: 'workflows', path: '^src/workflows/' },
  ],
  [
    { name: 'catalog', path: '^src/catalog/' },
    { name: 'auth', path: '^src/auth/' },
  ],
  [{ name: 'providers', path: '^src/providers/' }],
  [
    { name: 'activities', path: '^src/activities/' },
    { name: 'temporal', path: '^src/temporal/' },
  ],
  [{ name: 'runtime', path: '^src/(config|process)/' }],
  [{ name: 'admission', path: '^src/generations/admission/' }],
  [
    { name: 'batches', path: '^src/generations/batches/' },
    { name: 'generations', path: '^src/generations/[^/]+$' },
  ],
  [{ name: 'mcp', path: '^src/mcp/' }],
  [
    { name: 'api', path: '^src/api/' },
    { name: 'worker', path: '^src/worker/' },
    { name: 'result-host', path: '^src/result-host/' },
  ],
  [{ name: 'console', path: '^src/console/' }],
  [{ name: 'admin', path: '^src/admin/' }],
  [{ name: 'dev', path: '^src/dev/' }],
];

/** @type {import('dependency-cruiser').IForbiddenRuleType[]} */
const upwardOrSideways = floors.flatMap((floor, level) =>
  floor.map((room) => {
    const notBelow = floors
      .slice(level)
      .flat()
      .filter((other) => other.name !== room.name)
      .map((other) => other.path);
    return {
      name: `${room.name}-imports-only-below`,
      comment: `${room.name} may import its own room and rooms on lower floors only (see the plan at the top of this file).`,
      severity: 'error',
      from: { path: room.path },
      to: { path: notBelow.length ? notBelow : ['^$'] },
    };
  }),
);

const everyRoom = floors.flat().map((room) => room.path);

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...upwardOrSideways,
    {
      name: 'room-unknown',
      comment: 'Every file in src/ belongs to a room on the plan; add a new folder to the floors above.',
      severity: 'error',
      from: { path: '^src/', pathNot: everyRoom },
      to: {},
    },
    {
      name: 'no-circular',
      comment: 'No file reaches itself through its imports, within a room or across rooms.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js'],
    },
    reporterOptions: {
      dot: {
        collapsePattern: '^src/[^/]+/',
      },
    },
  },
};
