-- The authorization server's store (issue 44): no client secret in it.
--
-- Clients are public (token_endpoint_auth_method 'none', the only method offered now). oidc-provider
-- made a secret for every registration that asked for client_secret_basic or client_secret_post, or
-- named no method (RFC 7591's default), and oauth_store kept it in clear in the Client row's payload.
-- A public client's secret is dropped; a client that authenticated with its secret is deleted, with
-- the apps approved through it (their grants and key rows revoked, their tokens deleted): the app
-- registers again.
WITH confidential AS (
  DELETE FROM oauth_store
  WHERE model = 'Client' AND payload ? 'client_secret'
    AND payload->>'token_endpoint_auth_method' IS DISTINCT FROM 'none'
  RETURNING payload->>'client_id' AS client_id
), ended AS (
  UPDATE oauth_grants SET revoked_at = now()
  WHERE client_id IN (SELECT client_id FROM confidential) AND revoked_at IS NULL
  RETURNING grant_id, api_key_id
), keys AS (
  UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
  WHERE id IN (SELECT api_key_id FROM ended)
)
DELETE FROM oauth_store
WHERE grant_id IN (SELECT grant_id FROM ended)
   OR (model = 'Grant'
       AND id_sha256 IN (SELECT encode(sha256(convert_to(grant_id, 'UTF8')), 'hex') FROM ended));

UPDATE oauth_store SET payload = payload - 'client_secret' - 'client_secret_expires_at'
WHERE model = 'Client' AND payload ? 'client_secret';
