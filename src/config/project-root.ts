import path from 'node:path';

/** The checkout's root folder (where package.json is): local tools and data are kept under it. */
export const projectRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
