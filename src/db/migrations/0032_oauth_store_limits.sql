-- The authorization server's store (issue 44): no client secret in it, and every row goes by a rule.
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

-- Every row of the store goes by a rule of pruning (pruneConsoleRecords). A Grant row names its
-- grant in grant_id, as its tokens do, so that one rule finds every row of a grant no live app
-- holds; a Grant no app record names was never approved through the console and goes now.
-- Registration access tokens are made no more (nothing reads one): the ones kept go.
UPDATE oauth_store s SET grant_id = g.grant_id
FROM oauth_grants g
WHERE s.model = 'Grant' AND s.grant_id IS NULL
  AND s.id_sha256 = encode(sha256(convert_to(g.grant_id, 'UTF8')), 'hex');
DELETE FROM oauth_store WHERE model = 'Grant' AND grant_id IS NULL;
DELETE FROM oauth_store WHERE model = 'RegistrationAccessToken';
