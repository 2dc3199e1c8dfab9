import { fileURLToPath } from 'node:url';
import { Eta } from 'eta';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { csrfTokenFor } from './session-ids.js';

/**
 * Pages are Eta templates (src/console/views): plain HTML with `<%= %>` output, escaped by default,
 * loops and conditions only. Eta was chosen over a JSX-to-string library because it escapes every
 * value unless told otherwise (a forgotten escape is the usual XSS), needs no compiler step or
 * tsconfig change, and is small, typed and actively maintained.
 */
const eta = new Eta({
  // Beside this module, in src/ and in the build (npm run build copies them).
  views: fileURLToPath(new URL('./views/', import.meta.url)),
  cache: process.env.NODE_ENV !== 'development',
  autoEscape: true,
});

/** The navigation, in the order the layout shows it. */
export const navigation = [
  { href: '/', label: 'Overview' },
  { href: '/gallery', label: 'Gallery' },
  { href: '/generations', label: 'Generations' },
  { href: '/batches', label: 'Batches' },
  { href: '/playground', label: 'Playground' },
  { href: '/keys', label: 'API keys' },
  { href: '/apps', label: 'Connected apps' },
  { href: '/requests', label: 'Request log' },
] as const;

/** Renders a page inside the layout; a signed-in request gets the navigation and its form token. */
export function sendPage(
  request: FastifyRequest,
  reply: FastifyReply,
  view: string,
  data: Record<string, unknown>,
  status = 200,
): FastifyReply {
  const user = request.consoleUser;
  const html = eta.render(view, {
    ...data,
    csrf: user ? csrfTokenFor(user.sessionId) : (data.csrf ?? null),
    signedIn: user !== null,
    nav: navigation,
    path: request.url.split('?')[0],
  });
  return reply.code(status).type('text/html; charset=utf-8').send(html);
}

/** Formats shared by the templates. */
export const format = {
  time: (iso: string | null) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '—'),
  credits: (n: number) => n.toLocaleString('en-US'),
};
