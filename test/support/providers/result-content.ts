import { readFile } from 'node:fs/promises';
import type { ResultContent } from '../../../src/providers/provider.js';

/** A fetched result's bytes and type, whichever form the adapter handed it over in (a downloaded file is removed). */
export async function resultBytes(content: ResultContent): Promise<{ bytes: Buffer; contentType: string }> {
  if ('bytes' in content) return content;
  try {
    return { bytes: await readFile(content.file), contentType: content.contentType };
  } finally {
    await content.dispose();
  }
}
