// The simulated provider's renderer process (see ChildProcessRenderer): answers render requests over IPC.
import type { RenderReply, RenderRequest } from './renderer.js';
import { renderImage } from './image-drawing.js';
import { renderVideo } from './video-drawing.js';

process.on('message', (request: RenderRequest) => {
  const render =
    request.kind === 'image'
      ? renderImage(request.prompt, request.width, request.height, request.format)
      : renderVideo(request.job);
  render.then(
    (bytes) => reply({ id: request.id, bytes }),
    (error: unknown) =>
      reply({ id: request.id, error: error instanceof Error ? error.message : String(error) }),
  );
});
// The worker that started us is gone: nothing more will be asked.
process.on('disconnect', () => process.exit(0));

function reply(message: RenderReply): void {
  process.send?.(message);
}
