import type { HttpCore, HttpRequest } from '../core/http.js';

/** A page of a list as the API answers it (GenerationList, BatchList). */
export interface ListPage {
  data: unknown[];
  /** Null on the last page. */
  next_cursor: string | null;
}

/** What a list holds: a Generation, a Batch. */
export type ItemOf<L extends ListPage> = L['data'][number];

/** One page, and the way to the next. */
export type PageOf<L extends ListPage> = L & {
  hasNextPage(): boolean;
  nextPage(): Promise<PageOf<L> | null>;
};

/**
 * A list, newest first: iterating it with `for await` walks every page, fetching each only when
 * the previous one is used up; `firstPage()` and `pages()` give the pages. One pager for every
 * list (generations, batches): `requestOf` is the GET of the page after a cursor.
 */
export class Pager<L extends ListPage> implements AsyncIterable<ItemOf<L>> {
  constructor(
    private readonly http: HttpCore,
    private readonly requestOf: (cursor: string | undefined) => HttpRequest,
    private readonly cursor?: string,
  ) {}

  firstPage(): Promise<PageOf<L>> {
    return this.page(this.cursor);
  }

  async *pages(): AsyncGenerator<PageOf<L>> {
    let page: PageOf<L> | null = await this.firstPage();
    while (page) {
      yield page;
      page = await page.nextPage();
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ItemOf<L>> {
    for await (const page of this.pages()) yield* page.data as ItemOf<L>[];
  }

  private async page(cursor: string | undefined): Promise<PageOf<L>> {
    const { data } = await this.http.request<L>(this.requestOf(cursor));
    return {
      ...data,
      hasNextPage: () => data.next_cursor !== null,
      nextPage: () => (data.next_cursor === null ? Promise.resolve(null) : this.page(data.next_cursor)),
    };
  }
}
