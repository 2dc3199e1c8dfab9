import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { MAX_IMAGE_PIXELS } from '../../catalog/image-input.js';

// Every picture is new: libvips' operation cache would only hold memory in a long-running worker.
sharp.cache(false);

/**
 * Text as SVG (XML 1.0) can carry it: markup characters escaped, and the characters XML 1.0 has no
 * place for at all (most C0 controls, U+FFFE/U+FFFF, unpaired surrogates; not even as references)
 * drawn as U+FFFD. Prompts may hold any of them; the picture must still render.
 */
const escapeXml = (text: string) =>
  text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD')
    .replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * An SVG picture derived from the prompt: colours and shapes from its hash,
 * the prompt itself written across it. Different prompts give visibly
 * different pictures; the same prompt gives the same one.
 */
export function promptSvg(prompt: string, width: number, height: number, frame = 0): string {
  const digest = createHash('sha256').update(prompt).digest();
  const hue = (i: number) => Math.round((digest[i]! / 255) * 360);
  const shapes: string[] = [];
  for (let i = 0; i < 8; i++) {
    const cx = ((digest[2 + i]! / 255) * width + frame * (i + 1) * 3) % width;
    const cy = (digest[10 + i]! / 255) * height;
    const r = (0.05 + (digest[18 + i]! / 255) * 0.2) * Math.min(width, height);
    shapes.push(
      `<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="${r.toFixed(1)}" fill="hsl(${hue(26 + (i % 6))},70%,60%)" fill-opacity="0.55"/>`,
    );
  }
  const words = prompt.split(/\s+/).filter(Boolean);
  const lines: string[] = [];
  for (const word of words) {
    const last = lines.at(-1);
    if (last !== undefined && (last + ' ' + word).length <= 28) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push([...word].slice(0, 28).join('')); // whole characters: a pair is never split
    if (lines.length > 6) break;
  }
  const fontSize = Math.round(Math.min(width, height) / 14);
  const text = lines
    .slice(0, 6)
    .map(
      (line, i) =>
        `<text x="50%" y="${(35 + i * 11).toFixed(0)}%" font-size="${fontSize}" text-anchor="middle" font-family="sans-serif" fill="#fff" stroke="#000" stroke-width="${Math.max(1, fontSize / 20).toFixed(1)}">${escapeXml(line)}</text>`,
    )
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="hsl(${hue(0)},65%,35%)"/><stop offset="1" stop-color="hsl(${hue(1)},65%,55%)"/></linearGradient></defs>
<rect width="100%" height="100%" fill="url(#g)"/>${shapes.join('')}${text}</svg>`;
}

/** A real PNG or JPEG of the given size, derived from the prompt. */
export async function renderImage(
  prompt: string,
  width: number,
  height: number,
  format: 'png' | 'jpeg',
): Promise<Buffer> {
  const image = sharp(Buffer.from(promptSvg(prompt, width, height)), { limitInputPixels: MAX_IMAGE_PIXELS });
  return format === 'jpeg'
    ? image.jpeg({ quality: 88 }).toBuffer()
    : image.png({ compressionLevel: 2 }).toBuffer();
}
