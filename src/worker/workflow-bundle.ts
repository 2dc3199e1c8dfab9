import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

// The workflows sit beside this module's folder, as TypeScript (run through tsx) or as the build's JavaScript.
const self = fileURLToPath(import.meta.url);
const extension = path.extname(self);
const workflowsPath = fileURLToPath(new URL(`../workflows/index${extension}`, import.meta.url));
/** Idle unless a workflow was started with a trace context: every bundle has it (see the module). */
const tracingInterceptors = fileURLToPath(
  new URL(`../workflows/tracing-interceptors${extension}`, import.meta.url),
);

/**
 * Where `npm run build` writes the bundle of the build's workflows: beside this module in dist/.
 * Named apart from this module's own compiled file (workflow-bundle.js).
 */
export const prebuiltBundleName = 'workflow-code.js';

/**
 * Bundles the workflow code (webpack) without printing webpack's statistics. `entry`: another
 * module exporting the workflows (a test's second build); by default src/workflows.
 */
export async function bundleWorkflows(entry = workflowsPath): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: entry,
    workflowInterceptorModules: [tracingInterceptors],
    logger: quietBundlerLogger,
    webpackConfigHook: (config) => ({
      ...config,
      module: {
        ...config.module,
        rules: [
          ...(config.module?.rules ?? []),
          // The tracing interceptors load OpenTelemetry with require() on first use; webpack bundles a
          // require() only in a module it parses as `auto`, not `esm` (what dist/'s .js files are).
          { test: /[\\/]workflows[\\/]tracing-interceptors\.[jt]s$/, type: 'javascript/auto' },
        ],
      },
    }),
  });
  return asciiOnly(code);
}

/**
 * The bundle with every character past ASCII written as a \u escape. V8 keeps a string with even
 * one such character (a '→' in a comment) at two bytes a character: the 4 MB bundle took 8 MB in
 * each isolate that holds it, the worker's main thread and its workflow thread. The escapes mean
 * the same in every place they occur (comments, strings, regular expressions, identifiers).
 */
function asciiOnly(code: string): string {
  return code.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Writes the bundle to a file, so several workers or test files can share one build. */
export async function buildWorkflowBundle(outFile: string, entry?: string): Promise<void> {
  await writeFile(outFile, await bundleWorkflows(entry));
}

/**
 * The bundle `npm run build` made, when this module runs from that build (dist/worker/) and the
 * bundle is there: a worker then starts without webpack. Under tsx (development, tests) there is
 * none, and the worker bundles src/workflows as it starts, so an edit needs no build.
 */
export function prebuiltWorkflowBundle(): string | undefined {
  if (extension !== '.js') return undefined;
  const bundle = path.join(path.dirname(self), prebuiltBundleName);
  return existsSync(bundle) ? bundle : undefined;
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => process.stderr.write(`workflow bundle: ${message}\n`),
  error: (message: string) => process.stderr.write(`workflow bundle: ${message}\n`),
};
