import type { z } from 'zod';
import type { GenerationEventRow } from '../db/generation-events.js';
import { toGenerationEvent as eventOf } from '../db/generation-view.js';
import type { generationEventSchema } from './schemas.js';

/** The event as clients read it: in the JSON list, in an SSE `data:` line and as a webhook body. */
export type GenerationEvent = z.infer<typeof generationEventSchema>;

/** An event row as the API shows it (src/db/generation-view.ts, typed by the API's schema). */
export function toGenerationEvent(event: GenerationEventRow): GenerationEvent {
  return eventOf(event);
}

/** One Server-Sent Events message: the id resumes with Last-Event-ID, the event name is the type. */
export function sseMessage(event: GenerationEventRow): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(toGenerationEvent(event))}\n\n`;
}

/**
 * The Last-Event-ID header as an event number: absent is 0 (from the start); anything but a
 * decimal number of at most 9 digits is null (refused as invalid).
 */
export function lastEventIdOf(header: string | string[] | undefined): number | null {
  if (header === undefined) return 0;
  const value = [header].flat().join(',').trim();
  if (value === '') return 0;
  return /^\d{1,9}$/.test(value) ? Number(value) : null;
}
