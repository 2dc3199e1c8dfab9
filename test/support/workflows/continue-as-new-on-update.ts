// A workflow bundle for test/generations/update-meets-continue-as-new.test.ts: a run that continues
// as new in the very workflow task an update reaches it in, before answering it. The generation's
// own runs wait for their handlers (allHandlersFinished), so the server decides what such an update
// meets: here, deterministically, the server's failure for a run that ended before answering.
import { condition, continueAsNew, setHandler } from '@temporalio/workflow';
import { admitUpdate, cancelUpdate, resolveUpdate } from '../../../src/workflows/generation-messages.js';
import type { AdmitResult, GenerationProgress } from '../../../src/workflows/generation-types.js';

export interface Answers {
  admit: AdmitResult;
  progress: GenerationProgress;
}

/** Run 1 accepts the first update and continues as new in that task; run 2 answers every update. */
export async function continuesAsNewOnUpdate(answers: Answers, run = 1): Promise<void> {
  let reached = false;
  const answer =
    <T>(value: T) =>
    async (): Promise<T> => {
      if (run > 1) return value;
      reached = true;
      await condition(() => false);
      return value;
    };
  setHandler(admitUpdate, answer(answers.admit));
  setHandler(cancelUpdate, answer({ outcome: 'not_cancelable' as const, step: answers.progress.step }));
  setHandler(resolveUpdate, answer(answers.progress));
  if (run === 1) {
    await condition(() => reached);
    await continueAsNew<typeof continuesAsNewOnUpdate>(answers, run + 1);
  }
  await condition(() => false);
}
