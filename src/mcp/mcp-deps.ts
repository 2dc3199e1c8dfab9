import type { CommonQueryMethods } from 'slonik';
import type { CreditBalance } from '../db/credits-repository.js';
import type { GenerationRow } from '../db/generation-reads.js';
import type { KeyState } from '../db/key-limits.js';
import type { AdmissionDeps } from '../generations/admission/admit-generation.js';
import type { Previews } from './previews.js';

/** Waits for a generation to be terminal, woken by its change notification (the API's waiters of Prefer: wait). */
export type WaitForGeneration = (
  id: string,
  keyId: string,
  timeoutMs: number,
  read: () => Promise<GenerationRow | null>,
  signal?: AbortSignal,
  seen?: (row: GenerationRow) => void,
) => Promise<GenerationRow | null> | null;

/**
 * What the MCP server acts through, built once per API process and handed in by the API's route:
 * admission (the same admitGeneration and quoteGeneration as POST /v1/generations), the cached
 * reads, the waiters, and the API's own response schemas as JSON Schema (the tools' output schemas).
 * Nothing here holds state of an MCP session: every request gets a fresh server over these.
 */
export interface McpDeps {
  db: CommonQueryMethods;
  admission: AdmissionDeps;
  /** The account's generation through the API's invalidated cache (null: none in this account). */
  readGeneration(accountId: string, id: string): Promise<GenerationRow | null>;
  /**
   * Drops this process's cached copy of a generation this call just changed (a cancel), so that
   * the caller's next read sees the change without waiting for its notification.
   */
  forget(id: string): void;
  balance(accountId: string): Promise<CreditBalance>;
  waitFor: WaitForGeneration;
  /** The longest a call waits for a generation (MCP_WAIT_SECONDS, capped by the request timeout). */
  waitSeconds: number;
  /** The API's response shapes (src/api/schemas.ts) as JSON Schema. */
  outputSchemas: {
    generation: Record<string, unknown>;
    generationList: Record<string, unknown>;
    quote: Record<string, unknown>;
    credits: Record<string, unknown>;
    key: Record<string, unknown>;
  };
  /** The API's Generation object of a row (src/api/generation-view.ts). */
  toGeneration(row: GenerationRow): Record<string, unknown>;
  /** The API's ApiKey object (GET /v1/key) of a key's state (src/api/key-schemas.ts). */
  toApiKey(state: KeyState): ApiKeyView;
  /** The previews of finished results, made once each and kept (MCP_PREVIEW_CONCURRENCY at once). */
  previews: Pick<Previews, 'of'>;
}

/** Who calls: the API key's principal, and the request's life (aborted when the client goes away). */
export interface McpCaller {
  accountId: string;
  keyId: string;
  /** The key's own rules (Principal): a read-only key's tools that create or cancel refuse. */
  access: 'full' | 'read_only';
  models: readonly string[] | null;
  signal: AbortSignal;
  /** A tool call answered with the API's error `code` (the request log records it). */
  noteError?(code: string): void;
}

/** GET /v1/key's object, as get_key_limits words it. */
export interface ApiKeyView {
  spend_limit: number | null;
  limit_remaining: number | null;
  resets_at: string | null;
  models: string[] | null;
  access: 'full' | 'read_only';
  [field: string]: unknown;
}
