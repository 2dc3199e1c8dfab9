import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { renderImage } from '../../src/providers/sim-render.js';
import { ChildProcessRenderer } from '../../src/providers/sim-renderer.js';

/** The worker's renderer: the simulated provider's drawing, in a child process of its own. */
describe('ChildProcessRenderer', () => {
  const renderer = new ChildProcessRenderer();
  afterAll(() => renderer.close());

  it('returns real PNG and JPEG bytes of the size asked, drawn in another process', async () => {
    const png = await renderer.image('a lighthouse at night', 640, 360, 'png');
    expect(await sharp(png).metadata()).toMatchObject({ format: 'png', width: 640, height: 360 });
    const jpeg = await renderer.image('a lighthouse at night', 300, 400, 'jpeg');
    expect(await sharp(jpeg).metadata()).toMatchObject({ format: 'jpeg', width: 300, height: 400 });
  });

  it('fails a render in flight when the child dies, and starts a new child for the next one', async () => {
    const inFlight = renderer.image('interrupted', 2048, 2048, 'png');
    renderer.close();
    await expect(inFlight).rejects.toThrow(/renderer process exited/);
    const next = await renderer.image('after the restart', 64, 64, 'png');
    expect(await sharp(next).metadata()).toMatchObject({ width: 64, height: 64 });
  });

  it('passes a render error back as a failure', async () => {
    await expect(renderer.image('zero', 0, 10, 'png')).rejects.toThrow();
  });
});

describe('renderImage', () => {
  it('draws a prompt holding any character: controls, unpaired surrogates, markup, emoji, right-to-left', async () => {
    const controls = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('');
    for (const prompt of [
      `tab\u0013stop`,
      `all controls ${controls} end`,
      'not\ufffe\uffff characters',
      'half a pair \ud869 and \ude00',
      '<svg> & "quotes" \'too\' ]]>',
      '😀 🏳️‍🌈 שלום עולם مرحبا \u202eevil',
      `${'😀'.repeat(40)}`,
    ]) {
      const png = await renderImage(prompt, 64, 48, 'png');
      expect(await sharp(png).metadata(), JSON.stringify(prompt)).toMatchObject({
        format: 'png',
        width: 64,
        height: 48,
      });
    }
  });
});
