import { createWriteStream } from 'node:fs';
import { once } from 'node:events';

/**
 * A Chrome DevTools Protocol session with a Node process started with `--inspect=127.0.0.1:PORT`,
 * and with each of its worker threads (the Temporal worker runs its workflows in one: its V8 heap
 * is not the main thread's, and a main-thread heap snapshot never shows it). For bench:idle:
 * what each isolate holds, and heap snapshots of each to compare by constructor.
 */
export interface InspectedProcess {
  /** process.memoryUsage() as each thread sees it: its own isolate's heap, external memory and buffers. */
  memory(): Promise<Array<{ thread: string; usage: NodeJS.MemoryUsage }>>;
  /** Writes a heap snapshot of each thread to `${prefix}-${thread}.heapsnapshot`; returns the files. */
  snapshot(prefix: string): Promise<string[]>;
  /** A full garbage collection of the main thread's heap (what it holds is then what it keeps). */
  collectGarbage(): Promise<void>;
  close(): void;
}

interface Message {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
}

/** One target: the main thread (no session id) or a worker thread (its NodeWorker session id). */
interface Target {
  name: string;
  sessionId?: string;
}

export async function inspect(port: number): Promise<InspectedProcess> {
  const [page] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const socket = new WebSocket(page!.webSocketDebuggerUrl);
  await once(socket as unknown as EventTarget & NodeJS.EventEmitter, 'open');
  let nextId = 0;
  const pending = new Map<string, (message: Message) => void>();
  const listeners = new Set<(target: string | undefined, message: Message) => void>();
  const workers: Target[] = [];
  const dispatch = (sessionId: string | undefined, message: Message) => {
    if (message.id !== undefined) {
      const key = `${sessionId ?? ''}:${message.id}`;
      pending.get(key)?.(message);
      pending.delete(key);
      return;
    }
    for (const listener of listeners) listener(sessionId, message);
  };
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as Message;
    if (message.method === 'NodeWorker.attachedToWorker') {
      const { sessionId, workerInfo } = message.params as {
        sessionId: string;
        workerInfo: { workerId: string; title: string };
      };
      workers.push({ name: `thread-${workerInfo.workerId}`, sessionId });
    } else if (message.method === 'NodeWorker.receivedMessageFromWorker') {
      const { sessionId, message: inner } = message.params as { sessionId: string; message: string };
      dispatch(sessionId, JSON.parse(inner) as Message);
    } else dispatch(undefined, message);
  });
  const call = (target: Target, method: string, params: Record<string, unknown> = {}) => {
    const id = ++nextId;
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      pending.set(`${target.sessionId ?? ''}:${id}`, (reply) =>
        reply.error ? reject(new Error(`${method}: ${reply.error.message}`)) : resolve(reply.result ?? {}),
      );
      const text = JSON.stringify({ id, method, params });
      socket.send(
        target.sessionId === undefined
          ? text
          : JSON.stringify({
              id: ++nextId,
              method: 'NodeWorker.sendMessageToWorker',
              params: { sessionId: target.sessionId, message: text },
            }),
      );
    });
  };
  const main: Target = { name: 'main' };
  await call(main, 'NodeWorker.enable', { waitForDebuggerOnStart: false });
  // The attach events for running threads follow the enable at once.
  await new Promise((r) => setTimeout(r, 500));
  const targets = () => [main, ...workers];
  return {
    async memory() {
      return Promise.all(
        targets().map(async (target) => {
          const { result } = (await call(target, 'Runtime.evaluate', {
            expression: 'JSON.stringify(process.memoryUsage())',
            returnByValue: true,
          })) as { result: { value: string } };
          return { thread: target.name, usage: JSON.parse(result.value) as NodeJS.MemoryUsage };
        }),
      );
    },
    async snapshot(prefix) {
      const files: string[] = [];
      for (const target of targets()) {
        const file = `${prefix}-${target.name}.heapsnapshot`;
        const out = createWriteStream(file);
        const listener = (sessionId: string | undefined, message: Message) => {
          if (sessionId === target.sessionId && message.method === 'HeapProfiler.addHeapSnapshotChunk')
            out.write((message.params as { chunk: string }).chunk);
        };
        listeners.add(listener);
        await call(target, 'HeapProfiler.takeHeapSnapshot', { reportProgress: false });
        listeners.delete(listener);
        out.end();
        await once(out, 'finish');
        files.push(file);
      }
      return files;
    },
    async collectGarbage() {
      await call(main, 'HeapProfiler.collectGarbage', {});
    },
    close: () => socket.close(),
  };
}
