import { z } from 'zod';
import { toJsonSchema } from '../src/json-schema.ts';
const a = z.string().min(1).meta({ pattern: '^gen_$' }).describe('The id');
const b = z.string().min(1).meta({ pattern: '^gen_$', description: 'The id' });
console.log(JSON.stringify(toJsonSchema(a)), a.description, JSON.stringify(toJsonSchema(b)), b.description);
const w = z.number().int().min(0).meta({ maximum: 20, description: 'How long' }).optional();
console.log(JSON.stringify(toJsonSchema(z.object({ w }).strict(), 'input')), w.description);
const u = z.unknown().describe('req');
console.log(JSON.stringify(toJsonSchema(z.object({ request: u }).strict(), 'input')));
