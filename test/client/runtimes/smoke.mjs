// The client's core on one runtime (node, bun, deno), against the real API: the key and the base
// URL come from GENERATION_API_KEY and GENERATION_BASE_URL, as a user's would. Prints one JSON line.
import { Client, InvalidRequestError } from '../../../clients/typescript/dist/esm/index.js';

const client = new Client();
const models = await client.models.list();
const created = await client.generations.create({ model: 'lumen-lite', prompt: 'smoke test' });
const done = await client.generations.wait(created.id, { timeoutMs: 60_000, pollIntervalMs: 200 });
const replay = await client.generations.create(
  { model: 'lumen-lite', prompt: 'smoke test' },
  { idempotencyKey: created.idempotencyKey },
);
let invalid = null;
try {
  await client.generations.create({ model: 'lumen-lite', prompt: '' });
} catch (error) {
  invalid = {
    isInvalidRequest: error instanceof InvalidRequestError,
    code: error.code,
    issues: error.issues?.length,
  };
}
const page = await client.generations.list({ limit: 1 }).firstPage();
console.log(
  JSON.stringify({
    models: models.length,
    status: done.status,
    keyIsUuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(
      created.idempotencyKey,
    ),
    replaySameId: replay.id === created.id,
    invalid,
    listed: page.data.length,
  }),
);
