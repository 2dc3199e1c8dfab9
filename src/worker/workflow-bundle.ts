import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));
/** Idle unless a workflow was started with a trace context: every bundle has it (see the module). */
const tracingInterceptors = fileURLToPath(new URL('../workflows/tracing-interceptors.ts', import.meta.url));

/** Bundles the workflow code (webpack) without printing webpack's statistics. */
export async function bundleWorkflows(): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [tracingInterceptors],
    logger: quietBundlerLogger,
  });
  return code;
}

/** Writes the bundle to a file, so several workers or test files can share one build. */
export async function buildWorkflowBundle(outFile: string): Promise<void> {
  await writeFile(outFile, await bundleWorkflows());
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => process.stderr.write(`workflow bundle: ${message}\n`),
  error: (message: string) => process.stderr.write(`workflow bundle: ${message}\n`),
};
