import { isCancellation, setCurrentDetails } from '@temporalio/workflow';
import { generationErrors, whatFailed } from './generation-errors.js';
import type { generationEndings } from './generation-endings.js';
import type { generationSteps } from './generation-steps.js';
import { errorTypes, type GenerationStart } from './generation-types.js';
import { failureMessage, failureType } from './step-failures.js';

/**
 * The step between the debit and the submit: reference images the customer named by URL are
 * fetched once, by us, and stored with the generation's inputs, so every provider is sent our
 * checked copy (never the customer's URL to fetch on its own) and a URL that cannot be used is
 * the request's fault, refunded before any provider is asked. Only decisions and an activity call.
 */
export function imageStaging(
  start: GenerationStart,
  steps: ReturnType<typeof generationSteps>,
  { fail, giveUp }: Pick<ReturnType<typeof generationEndings>, 'fail' | 'giveUp'>,
) {
  /**
   * The generation to submit: `start` with the customer's image URLs replaced by our copies, or as
   * it is when it names none; null when it ended instead (an image refused, or staging gave up:
   * refunded). `inBackground` is told before a fetch starts: the POST does not wait for the
   * customer's host.
   */
  return async function withImagesStaged(inBackground: () => void): Promise<GenerationStart | null> {
    if (!namesUrls(start)) return start;
    inBackground();
    setCurrentDetails('fetching and storing the reference images');
    try {
      const { input } = await steps.stageImages(start);
      return { ...start, input };
    } catch (error) {
      if (isCancellation(error)) throw error;
      if (failureType(error) === errorTypes.referenceImageRefused)
        await fail(generationErrors.referenceImageUnusable(failureMessage(error)));
      else await giveUp(error, whatFailed.staging);
      return null;
    }
  };
}

/**
 * Whether the request names a URL besides its prompt that is not an inline image the API stored
 * (those are under the input folder): only then may there be a customer's image to fetch. Which
 * fields are images is the catalog's, and the activity's to read; this only spares the rest a step.
 */
function namesUrls(start: GenerationStart): boolean {
  const ours = start.inputPrefix === null ? null : `/${start.inputPrefix}/`;
  return Object.entries(start.input).some(
    ([field, value]) =>
      field !== 'prompt' &&
      [value]
        .flat()
        .some(
          (item) => typeof item === 'string' && /^https?:\/\//i.test(item) && !(ours && item.includes(ours)),
        ),
  );
}
