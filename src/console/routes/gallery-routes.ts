import type { FastifyInstance } from 'fastify';
import {
  cursorAfter,
  galleryModels,
  getGalleryImage,
  listGallery,
  parsePageCursor,
  type GalleryImage,
} from '../../db/console-reads.js';
import { thumbnailName } from '../../media/thumbnail.js';
import { mediaTypeOfName } from '../../storage/storage.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

const PAGE = 24;

/** The gallery: the account's persisted images, newest first, as thumbnails; each image's page; its download. */
export function galleryRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  /**
   * The thumbnail's URL beside the image, or the image itself for results persisted before
   * thumbnails were made: a tile never shows a broken image.
   */
  const thumbnailOf = async (image: GalleryImage): Promise<string> => {
    const key = deps.storage.keyOf(image.url);
    if (!key?.prefix) return image.url;
    const name = thumbnailName(key.name);
    return (await deps.storage.size(key.prefix, name)) === null
      ? image.url
      : deps.storage.urlFor(key.prefix, name);
  };

  app.get<{ Querystring: { model?: string; before?: string } }>('/gallery', async (request, reply) => {
    const { accountId } = userOf(request);
    const model = typeof request.query.model === 'string' && request.query.model ? request.query.model : null;
    const before = parsePageCursor(request.query.before);
    const [rows, models] = await Promise.all([
      listGallery(deps.db, { accountId, model, limit: PAGE + 1, before }),
      galleryModels(deps.db, accountId),
    ]);
    const page = rows.slice(0, PAGE);
    const tiles = await Promise.all(
      page.map(async (image) => ({ image, thumbnail: await thumbnailOf(image) })),
    );
    const last = page.at(-1);
    const next = rows.length > PAGE && last ? cursorAfter(last) : null;
    const query = (extra: Record<string, string>) =>
      new URLSearchParams({ ...(model ? { model } : {}), ...extra }).toString();
    return sendPage(request, reply, 'gallery', {
      title: 'Gallery',
      tiles,
      models,
      model,
      nextHref: next ? `/gallery?${query({ before: next })}` : null,
      format,
    });
  });

  app.get<{ Params: { id: string } }>('/gallery/:id', async (request, reply) => {
    const image = await ownImage(userOf(request).accountId, request.params.id);
    if (!image || image.content_expired)
      return sendPage(request, reply, 'expired', { title: 'Not available' }, 404);
    return sendPage(request, reply, 'gallery-image', {
      title: `Image of ${image.generation_id}`,
      image,
      format,
    });
  });

  app.get<{ Params: { id: string } }>('/gallery/:id/download', async (request, reply) => {
    const image = await ownImage(userOf(request).accountId, request.params.id);
    const key = image && !image.content_expired ? deps.storage.keyOf(image.url) : null;
    const bytes = key?.prefix ? await deps.storage.read(key.prefix, key.name) : null;
    if (!image || !key || !bytes) return sendPage(request, reply, 'expired', { title: 'Not available' }, 404);
    const extension = key.name.slice(key.name.lastIndexOf('.'));
    return reply
      .type(mediaTypeOfName(key.name))
      .header('content-disposition', `attachment; filename="${image.generation_id}${extension}"`)
      .send(bytes);
  });

  async function ownImage(accountId: string, id: string): Promise<GalleryImage | null> {
    return /^\d{1,15}$/.test(id) ? getGalleryImage(deps.db, accountId, Number(id)) : null;
  }
}
