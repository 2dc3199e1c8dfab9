import vm from 'node:vm';

/**
 * npm run bench:vm-timeout — what a call into a vm context costs with and without a timeout.
 * The Temporal SDK calls into a workflow's sandbox with `timeout` (its isolateExecutionTimeout, 5 s:
 * its deadlock detection) several times per activation, and Node enforces a vm timeout with a
 * watchdog thread started and joined per call. BENCH_CALLS (default 20,000) calls of a one-line
 * script each way, in a context made as the SDK makes its own (microtasks run after each call).
 */
const calls = Number(process.env.BENCH_CALLS ?? 20_000);
const context = vm.createContext({ counter: 0 }, { microtaskMode: 'afterEvaluate' });
const script = new vm.Script('counter++');
for (const timeout of [undefined, 5_000]) {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < calls; i++) script.runInContext(context, timeout === undefined ? {} : { timeout });
  const cpu = process.cpuUsage(cpuBefore);
  const wall = performance.now() - started;
  console.log(
    `${timeout === undefined ? 'no timeout  ' : `timeout ${timeout} ms`}: ${((wall / calls) * 1000).toFixed(1)} µs wall, ${((cpu.user + cpu.system) / calls).toFixed(1)} µs CPU per call (${calls} calls)`,
  );
}
