// The simulated provider's renderer process (see ChildProcessRenderer): answers render requests over IPC.
import type { RenderReply, RenderRequest } from './sim-renderer.js';
import { renderImage } from './sim-render.js';
import { renderVideo } from './sim-video.js';

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
