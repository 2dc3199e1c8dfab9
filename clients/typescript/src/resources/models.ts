import { NotFoundError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import type { ApiKey, CreditBalance, Model } from '../types.js';

/** client.models: the live catalog with each model's options, allowed values, defaults and prices. */
export class Models {
  constructor(private readonly http: HttpCore) {}

  async list(options: { signal?: AbortSignal } = {}): Promise<Model[]> {
    const response = await this.http.request<{ data: Model[] }>({
      method: 'GET',
      path: '/models',
      signal: options.signal,
    });
    return response.data.data;
  }

  /** One model by id (from the catalog: the API has no per-model route). NotFoundError when unknown. */
  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<Model> {
    const model = (await this.list(options)).find((m) => m.id === id);
    if (!model)
      throw new NotFoundError({
        status: 404,
        code: 'model_not_found',
        message: `No model ${id} in the catalog.`,
      });
    return model;
  }
}

/** client.credits: the balance the API draws from. */
export class Credits {
  constructor(private readonly http: HttpCore) {}

  async get(options: { signal?: AbortSignal } = {}): Promise<CreditBalance> {
    return (
      await this.http.request<CreditBalance>({ method: 'GET', path: '/credits', signal: options.signal })
    ).data;
  }
}

/** `client.key`: the key (or connected app) the client calls with, its rules and its spend (GET /v1/key). */
export class Key {
  constructor(private readonly http: HttpCore) {}

  /** Its access, models, spend limit, what is left of it and when it resets, and what it spent. */
  async get(options: { signal?: AbortSignal } = {}): Promise<ApiKey> {
    return (await this.http.request<ApiKey>({ method: 'GET', path: '/key', signal: options.signal })).data;
  }
}
