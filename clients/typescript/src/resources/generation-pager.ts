import type { HttpCore } from '../core/http.js';
import type { Generation, GenerationListPage, GenerationStatus } from '../types.js';

export interface ListFilters {
  /** One status or several (sent comma-separated). */
  status?: GenerationStatus | GenerationStatus[];
  model?: string;
  /** Page size, 1 to 100 (the API's default: 20). */
  limit?: number;
  /** Start after this cursor (a page's next_cursor). */
  cursor?: string;
  /** Only the generation this Idempotency-Key made (APIs with the filter). */
  idempotency_key?: string;
  signal?: AbortSignal;
}

/** One page, and the way to the next. */
export interface Page extends GenerationListPage {
  hasNextPage(): boolean;
  nextPage(): Promise<Page | null>;
}

/**
 * The generations of a list query, newest first. Iterating it with `for await` walks every page,
 * fetching each only when the previous one is used up.
 */
export class GenerationPager implements AsyncIterable<Generation> {
  constructor(
    private readonly http: HttpCore,
    private readonly filters: ListFilters,
  ) {}

  firstPage(): Promise<Page> {
    return this.page(this.filters.cursor);
  }

  async *pages(): AsyncGenerator<Page> {
    let page: Page | null = await this.firstPage();
    while (page) {
      yield page;
      page = await page.nextPage();
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Generation> {
    for await (const page of this.pages()) yield* page.data;
  }

  private async page(cursor: string | undefined): Promise<Page> {
    const { status, model, limit, idempotency_key, signal } = this.filters;
    const response = await this.http.request<GenerationListPage>({
      method: 'GET',
      path: '/generations',
      query: {
        limit,
        cursor,
        status: Array.isArray(status) ? status.join(',') : status,
        model,
        idempotency_key,
      },
      signal,
    });
    const data = response.data;
    return {
      ...data,
      hasNextPage: () => data.next_cursor !== null,
      nextPage: () => (data.next_cursor === null ? Promise.resolve(null) : this.page(data.next_cursor)),
    };
  }
}
