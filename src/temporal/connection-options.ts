import { Connection, type TLSConfig } from '@temporalio/client';

/** The TEMPORAL_TLS* and TEMPORAL_API_KEY settings, as config/service-config.ts parses them (PEM files already read). */
export interface TemporalSecurity {
  TEMPORAL_TLS?: 'true' | 'false';
  TEMPORAL_TLS_CERT?: Uint8Array;
  TEMPORAL_TLS_KEY?: Uint8Array;
  TEMPORAL_TLS_CA?: Uint8Array;
  TEMPORAL_TLS_SERVER_NAME?: string;
  TEMPORAL_API_KEY?: string;
}

/** What both Temporal connections (the client's and the worker's native one) take. */
export interface TemporalConnectionOptions {
  address: string;
  tls?: TLSConfig;
  apiKey?: string;
}

/**
 * The options every connection to Temporal is made with: TLS when any TLS setting or an API key
 * is given (unless TEMPORAL_TLS=false), mTLS with a client certificate, and the API key sent as a
 * bearer token on every call.
 */
export function temporalConnectionOptions(
  address: string,
  security: TemporalSecurity,
): TemporalConnectionOptions {
  const options: TemporalConnectionOptions = { address };
  if (security.TEMPORAL_API_KEY) options.apiKey = security.TEMPORAL_API_KEY;
  const wantsTls =
    security.TEMPORAL_TLS === 'true' ||
    (security.TEMPORAL_TLS === undefined &&
      Boolean(
        security.TEMPORAL_TLS_CERT ??
        security.TEMPORAL_TLS_CA ??
        security.TEMPORAL_TLS_SERVER_NAME ??
        security.TEMPORAL_API_KEY,
      ));
  if (!wantsTls) return options;
  const tls: TLSConfig = {};
  if (security.TEMPORAL_TLS_SERVER_NAME) tls.serverNameOverride = security.TEMPORAL_TLS_SERVER_NAME;
  if (security.TEMPORAL_TLS_CA) tls.serverRootCACertificate = security.TEMPORAL_TLS_CA;
  if (security.TEMPORAL_TLS_CERT && security.TEMPORAL_TLS_KEY)
    tls.clientCertPair = { crt: security.TEMPORAL_TLS_CERT, key: security.TEMPORAL_TLS_KEY };
  options.tls = tls;
  return options;
}

/** Connects once (the SDK checks the frontend's health as it connects): whether Temporal answers now. */
export async function probeTemporal(options: TemporalConnectionOptions): Promise<void> {
  const connection = await Connection.connect({ ...options, connectTimeout: 5_000 });
  await connection.close();
}
