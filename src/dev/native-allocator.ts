import { existsSync } from 'node:fs';

/**
 * jemalloc (Debian's `libjemalloc2`), where this machine has it: more of the worker's native memory
 * (the Temporal core's Rust side, libvips) goes back to the system after a burst of work than under
 * glibc's malloc (bench:idle, with libvips' cache off too: 343 MB at 1,000 parked generations against
 * 395–438, 501 MB at 10,000 against 531; docs/capacity.md, "Worker memory at rest"). The Dockerfile
 * installs and preloads it for every process; `npm start` and the benches preload it when installed.
 */
const candidates = [
  '/usr/local/lib/libjemalloc.so.2',
  `/usr/lib/${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu/libjemalloc.so.2`,
];

/**
 * jemalloc's options, as the Dockerfile sets them (MALLOC_CONF). By default jemalloc hands freed
 * pages back to the system only as later allocations pass by, over 10 s, from 4 arenas per core: a
 * worker at rest after a burst kept them. A background thread returns them within a second of being
 * freed, and two arenas leave fewer half-used pages behind (bench:idle, docs/capacity.md).
 */
export const jemallocOptions = 'background_thread:true,dirty_decay_ms:1000,narenas:2';

/**
 * The environment that preloads jemalloc with its options (a MALLOC_CONF already set wins), or
 * nothing when it is not installed (glibc's malloc then).
 */
export function nativeAllocatorEnv(): { LD_PRELOAD?: string; MALLOC_CONF?: string } {
  if (process.platform !== 'linux') return {};
  const found = candidates.find((path) => existsSync(path));
  return found ? { LD_PRELOAD: found, MALLOC_CONF: process.env.MALLOC_CONF ?? jemallocOptions } : {};
}
