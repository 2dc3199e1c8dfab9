import { createHash } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { catalogEntryOf, type CatalogEntry } from '../catalog/catalog-entry.js';
import { routesOf } from '../catalog/routes.js';
import { storedDefinition } from '../db/catalog-repository.js';
import { claimInputPrefix } from '../db/generation-results.js';
import { randomBase62 } from '../vocabulary/ids.js';
import { CustomerInputRejection, OwnStorageError } from '../providers/provider.js';
import { fetchReferenceImage, referenceImageSources } from '../providers/reference-images.js';
import { extensionOfMediaType, type Storage } from '../storage/storage.js';
import type { GenerationStart } from '../workflows/generation-types.js';
import type { GenerationActivities } from '../workflows/contracts/generation.js';
import type { ActivityDeps } from './activity-deps.js';
import { lastQuotedEntry } from './debit.js';
import { referenceImageRefused, settledFailure } from './failures.js';

type StagingDeps = Pick<ActivityDeps, 'db' | 'storage' | 'referenceImageFetch'>;

/**
 * The customer's own reference image URLs, fetched once and stored before the submit, so that
 * every provider is sent our checked copy (fal and Replicate as data URIs or our URL, OpenAI as an
 * upload) and a URL that cannot be used is refused before any provider is asked, never counted
 * against one. Models on the simulated provider are left alone: it fetches frames itself, and
 * one it cannot have is replaced by the prompt picture (docs/providers.md).
 */
export function createStagingActivities(deps: StagingDeps): Pick<GenerationActivities, 'stageImages'> {
  const { db, storage } = deps;
  const policy = deps.referenceImageFetch ?? { allowCidrs: [], allowHttp: false };

  /**
   * Idempotent on the generation: the copies go to its input folder (recorded before any file is
   * written, deleted with its inputs), each named by its URL's digest, and a copy stored by an
   * earlier attempt (a worker that died, a support reset) is used rather than fetched again.
   */
  async function stageImages(start: GenerationStart): Promise<{ input: Record<string, unknown> }> {
    const entry = await entryOf(start.model);
    if (!entry || routesOf(entry).every((route) => route.provider === 'simulated'))
      return { input: start.input };
    const fields = referenceImageSources(entry);
    const isCustomers = (value: unknown): value is string =>
      typeof value === 'string' && !value.startsWith('data:') && storage.keyOf(value) === null;
    const urls = new Set(fields.flatMap((field) => [start.input[field]].flat().filter(isCustomers)));
    if (urls.size === 0) return { input: start.input };

    const claimed = await claimInputPrefix(db, start.generationId, `i${randomBase62(32)}`);
    if (claimed.refunded) throw settledFailure(start.generationId);
    const context = Context.current();
    const alive = setInterval(() => context.heartbeat(), 10_000);
    const copies = new Map<string, string>();
    try {
      for (const url of urls) copies.set(url, await stageOne(claimed.prefix, url));
    } finally {
      clearInterval(alive);
    }
    const swap = (value: unknown) => (typeof value === 'string' ? (copies.get(value) ?? value) : value);
    const input = { ...start.input };
    for (const field of fields) {
      const value = input[field];
      if (value !== undefined) input[field] = Array.isArray(value) ? value.map(swap) : swap(value);
    }
    return { input };
  }

  /** Our copy of one customer URL: the one stored before, or fetched and stored now. */
  async function stageOne(prefix: string, url: string): Promise<string> {
    const name = `ref-${createHash('sha256').update(url).digest('hex').slice(0, 32)}`;
    const stored = await ownStorage(() => storedCopy(storage, prefix, name));
    if (stored) return stored;
    let image: { bytes: Buffer; contentType: string };
    try {
      image = await fetchReferenceImage(url, policy);
    } catch (error) {
      if (error instanceof CustomerInputRejection) throw referenceImageRefused(error.message);
      throw error;
    }
    const extension = extensionOfMediaType(image.contentType) ?? 'bin';
    return ownStorage(() => storage.put(prefix, `${name}.${extension}`, image.bytes));
  }

  /** The entry the debit quoted from in this process, else the stored one (a retired model still runs). */
  async function entryOf(model: string): Promise<CatalogEntry | null> {
    const quoted = lastQuotedEntry(model)?.entry;
    return quoted ?? catalogEntryOf(model, await storedDefinition(db, model));
  }

  return { stageImages };
}

/** The image types a staged copy can be stored as (its name's extension says which). */
const stagedExtensions = ['png', 'jpg', 'webp', 'gif'];

/** The URL of a copy stored under `name` by an earlier attempt, whatever its type; null when none. */
async function storedCopy(storage: Storage, prefix: string, name: string): Promise<string | null> {
  const sizes = await Promise.all(stagedExtensions.map((ext) => storage.size(prefix, `${name}.${ext}`)));
  const found = sizes.findIndex((size) => size !== null);
  return found < 0 ? null : storage.urlFor(prefix, `${name}.${stagedExtensions[found]}`);
}

/** A call on our own storage: its failure is ours (retried), never the customer's or a provider's. */
async function ownStorage<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof OwnStorageError) throw error;
    throw new OwnStorageError(
      `our storage failed while storing a reference image: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}
