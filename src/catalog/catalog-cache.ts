import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import type { z } from 'zod';
import { listActiveModels } from '../db/catalog-repository.js';
import { InFlight } from '../caches/in-flight.js';
import { modelDefinitionSchema, type CatalogEntry } from './catalog-entry.js';
import type { ProviderName } from './provider-mapping.js';
import type { PublicModel } from './public-model.js';
import { quotePrice, resolveOptions } from './pricing.js';
import { buildRequestJsonSchema, buildRequestSchema } from './request-schema.js';
import { routesOf } from './routes.js';

/** A catalog entry with what is derived from it, built once per catalog load. */
export interface CompiledModel {
  entry: CatalogEntry;
  requestSchema: z.ZodTypeAny;
  /** The entry as GET /v1/models shows it. */
  publicView: PublicModel;
}

export function compileModel(entry: CatalogEntry): CompiledModel {
  return {
    entry,
    requestSchema: buildRequestSchema(entry),
    publicView: {
      id: entry.id,
      name: entry.name,
      description: entry.description,
      media_type: entry.media_type,
      max_images: entry.max_images,
      accepts_data_uris: entry.accepts_data_uris,
      unknown_fields: entry.unknown_fields,
      prompt: entry.prompt,
      options: entry.options,
      pricing: entry.pricing,
      default_price: quotePrice(entry, resolveOptions(entry, {})),
      request_schema: buildRequestJsonSchema(entry),
    },
  };
}

/**
 * The live catalog, held in memory. It reloads when PostgreSQL announces a
 * change to `models` (call `reload`) and every `refreshMs` as a safety net.
 */
export class CatalogCache {
  private models = new Map<string, CompiledModel>();
  private timer: NodeJS.Timeout | null = null;
  private readonly reloads = new InFlight();
  /** Bumped on every reload; lets derived documents (OpenAPI) know when to rebuild. */
  version = 0;

  /**
   * `offered`: the providers whose models are served (those with credentials); a model of another
   * provider is left out, as if it were not in the catalog.
   */
  constructor(
    private readonly db: CommonQueryMethods,
    private readonly log: Logger,
    private readonly offered: ReadonlySet<ProviderName> = new Set(['simulated']),
  ) {}

  async start(refreshMs: number): Promise<void> {
    await this.reload();
    this.timer = setInterval(
      () =>
        void this.reload().catch((error: unknown) => this.log.warn({ err: error }, 'catalog reload failed')),
      refreshMs,
    );
    this.timer.unref();
  }

  /**
   * Reads the active models. An entry whose definition does not parse, or cannot be compiled, is
   * logged and left out, so one bad edit in the web app cannot take the whole catalog down.
   */
  async reload(): Promise<void> {
    await this.reloads.run(() => this.load());
  }

  private async load(): Promise<void> {
    const next = new Map<string, CompiledModel>();
    for (const row of await listActiveModels(this.db)) {
      const parsed = modelDefinitionSchema.safeParse(row.definition);
      if (!parsed.success) {
        this.log.error(
          { model: row.id, issues: parsed.error.issues },
          'catalog entry is invalid and is left out',
        );
        continue;
      }
      // A routed model is offered when one of its routes is; the others are left out of its plans.
      if (!routesOf(parsed.data).some((route) => this.offered.has(route.provider))) continue;
      try {
        next.set(row.id, compileModel({ id: row.id, ...parsed.data }));
      } catch (error) {
        this.log.error({ model: row.id, err: error }, 'catalog entry could not be compiled and is left out');
      }
    }
    this.models = next;
    this.version += 1;
  }

  /** Whether this process serves a provider's models (its credentials are configured). */
  offers(provider: ProviderName): boolean {
    return this.offered.has(provider);
  }

  get(id: string): CompiledModel | undefined {
    return this.models.get(id);
  }

  list(): CompiledModel[] {
    return [...this.models.values()];
  }

  /** No more reloads (timer or announced); resolves once the one running, if any, has ended. */
  stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    return this.reloads.stop();
  }
}
