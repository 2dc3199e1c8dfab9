import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

/** Bundles the workflow code once (webpack), so several workers or test files can share it. */
export async function buildWorkflowBundle(outFile: string): Promise<void> {
  const { code } = await bundleWorkflowCode({ workflowsPath, logger: quietBundlerLogger });
  await writeFile(outFile, code);
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => process.stderr.write(`workflow bundle: ${message}\n`),
  error: (message: string) => process.stderr.write(`workflow bundle: ${message}\n`),
};
