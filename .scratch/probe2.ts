import { z } from 'zod';
import { toJsonSchema } from '../src/json-schema.ts';
const branches = [{ type: 'object', properties: { a: { type: 'string' } } }, { type: 'object', properties: { b: { type: 'integer' } } }];
const s = z.object({ request: z.unknown().meta({ anyOf: branches, description: 'req' }) }).strict();
console.log(JSON.stringify(toJsonSchema(s, 'input')));
console.log(JSON.stringify(z.toJSONSchema(s, {io: 'input'})));
const w = z.number().int().min(0).meta({ maximum: 20 }).describe('How long');
console.log(w.safeParse(30));
