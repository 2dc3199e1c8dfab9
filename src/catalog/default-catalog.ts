import type { ModelDefinition } from './catalog-entry.js';

const imageAspectRatios = ['1:1', '3:2', '2:3', '4:3', '3:4', '4:5', '5:4', '16:9', '9:16', '21:9', 'auto'];
const sizeDescriptions = {
  '1K': '1024 px long edge',
  '1.5K': '1536 px long edge',
  '2K': '2048 px long edge',
  '4K': '4096 px long edge',
};
const aspectRatioDescription =
  'Width:height of the output. `auto` follows the first reference image, or 1:1 without one.';

/**
 * The models a fresh database starts with. Seeding inserts only ids that are
 * missing, so prices edited later in the database (by the web app) are kept.
 */
export const defaultCatalog: Array<{ id: string; sort_order: number; definition: ModelDefinition }> = [
  {
    id: 'lumen-lite',
    sort_order: 10,
    definition: {
      name: 'Lumen Lite',
      description:
        'Fast, inexpensive image model with a restricted request schema: unknown fields are rejected, reference images must be HTTPS URLs, and size is chosen by quality.',
      media_type: 'image',
      unknown_fields: 'reject',
      prompt: { min_length: 1, max_length: 3000 },
      max_images: 4,
      accepts_data_uris: false,
      options: {
        aspect_ratio: {
          type: 'enum',
          values: imageAspectRatios,
          default: '1:1',
          description: aspectRatioDescription,
        },
        quality: {
          type: 'enum',
          values: ['basic', 'high', 'ultra'],
          default: 'basic',
          descriptions: { basic: '2K output', high: '3K output', ultra: '4K output' },
          description: 'Output quality; sets the output size and the price.',
        },
        output_format: {
          type: 'enum',
          values: ['png', 'jpeg'],
          default: 'png',
          description: 'Encoding of the output image.',
        },
      },
      output_size: { by: 'quality', long_edge_px: { basic: 2048, high: 3072, ultra: 4096 } },
      pricing: {
        unit: 'generation',
        by: 'quality',
        credits: { basic: 2, high: 4, ultra: 6 },
        surcharges: {},
      },
    },
  },
  {
    id: 'lumen-pro',
    sort_order: 20,
    definition: {
      name: 'Lumen Pro',
      description: 'High-fidelity image generation and editing with up to 8 reference images.',
      media_type: 'image',
      unknown_fields: 'ignore',
      prompt: { min_length: 1, max_length: 5000 },
      max_images: 8,
      accepts_data_uris: true,
      options: {
        aspect_ratio: {
          type: 'enum',
          values: imageAspectRatios,
          default: 'auto',
          description: aspectRatioDescription,
        },
        resolution: {
          type: 'enum',
          values: ['1K', '2K', '4K'],
          default: '1K',
          descriptions: sizeDescriptions,
          description: 'Output size; changes the price.',
        },
      },
      output_size: { by: 'resolution', long_edge_px: { '1K': 1024, '2K': 2048, '4K': 4096 } },
      pricing: {
        unit: 'generation',
        by: 'resolution',
        credits: { '1K': 4, '2K': 6, '4K': 10 },
        surcharges: {},
      },
    },
  },
  {
    id: 'nova-image',
    sort_order: 30,
    definition: {
      name: 'Nova Image',
      description: 'General-purpose image model, strong at typography and layouts.',
      media_type: 'image',
      unknown_fields: 'ignore',
      prompt: { min_length: 1, max_length: 5000 },
      max_images: 4,
      accepts_data_uris: true,
      options: {
        aspect_ratio: {
          type: 'enum',
          values: ['1:1', '4:3', '3:4', '16:9', '9:16'],
          default: '1:1',
          description: 'Width:height of the output.',
        },
        resolution: {
          type: 'enum',
          values: ['1K', '2K', '4K'],
          default: '2K',
          descriptions: sizeDescriptions,
          description: 'Output size; changes the price.',
        },
      },
      output_size: { by: 'resolution', long_edge_px: { '1K': 1024, '2K': 2048, '4K': 4096 } },
      pricing: {
        unit: 'generation',
        by: 'resolution',
        credits: { '1K': 3, '2K': 5, '4K': 9 },
        surcharges: {},
      },
    },
  },
  {
    id: 'prism-2',
    sort_order: 40,
    definition: {
      name: 'Prism 2',
      description: 'The Prism family: quick drafts at 1K, 1.5K or 2K.',
      media_type: 'image',
      unknown_fields: 'ignore',
      prompt: { min_length: 1, max_length: 5000 },
      max_images: 2,
      accepts_data_uris: true,
      options: {
        aspect_ratio: {
          type: 'enum',
          values: ['1:1', '3:2', '2:3', '16:9', '9:16'],
          default: '1:1',
          description: 'Width:height of the output.',
        },
        resolution: {
          type: 'enum',
          values: ['1K', '1.5K', '2K'],
          default: '1K',
          descriptions: sizeDescriptions,
          description: 'Output size; changes the price.',
        },
      },
      output_size: { by: 'resolution', long_edge_px: { '1K': 1024, '1.5K': 1536, '2K': 2048 } },
      pricing: {
        unit: 'generation',
        by: 'resolution',
        credits: { '1K': 2, '1.5K': 3, '2K': 4 },
        surcharges: {},
      },
    },
  },
  {
    id: 'motion-1',
    sort_order: 50,
    definition: {
      name: 'Motion 1',
      description:
        'Video model. Text only: text-to-video. With first_frame_image: animates that frame. With first_frame_image and last_frame_image: a transition between them. generate_audio adds a soundtrack.',
      media_type: 'video',
      unknown_fields: 'ignore',
      prompt: { min_length: 1, max_length: 5000 },
      max_images: 0,
      accepts_data_uris: true,
      options: {
        first_frame_image: {
          type: 'image',
          description: 'The first frame of the video (first-frame animation).',
        },
        last_frame_image: {
          type: 'image',
          requires: 'first_frame_image',
          description: 'The last frame of the video (first/last-frame transition). Needs first_frame_image.',
        },
        aspect_ratio: {
          type: 'enum',
          values: ['16:9', '9:16', '1:1'],
          default: '16:9',
          description: 'Width:height of the video.',
        },
        resolution: {
          type: 'enum',
          values: ['720p', '1080p'],
          default: '720p',
          descriptions: { '720p': '1280 px long edge', '1080p': '1920 px long edge' },
          description: 'Video size; changes the price per second.',
        },
        duration: {
          type: 'integer_enum',
          values: [4, 6, 8],
          default: 4,
          unit: 'seconds',
          description: 'Length of the video in seconds; the price is per second.',
        },
        generate_audio: {
          type: 'boolean',
          default: false,
          description: 'Generate a soundtrack (an AAC track in the MP4); adds a per-second surcharge.',
        },
      },
      output_size: { by: 'resolution', long_edge_px: { '720p': 1280, '1080p': 1920 } },
      pricing: {
        unit: 'second',
        by: 'resolution',
        credits: { '720p': 5, '1080p': 8 },
        surcharges: { generate_audio: { true: 2 } },
      },
    },
  },
];
