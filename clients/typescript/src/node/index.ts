/** The Node entry point (also Bun and Deno's Node compatibility): everything in the core, and files. */
export * from '../index.js';
export {
  download,
  downloadAll,
  DownloadError,
  type DownloadOptions,
  type OutputFile,
  type SavedFile,
} from './download.js';
export {
  downloadBatch,
  folderOf,
  jsonlFile,
  type BatchDownload,
  type BatchDownloadOptions,
} from './batch-download.js';
