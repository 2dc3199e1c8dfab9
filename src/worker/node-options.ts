/**
 * Node's options for the worker process, given on its command line (`npm run worker`,
 * docker-compose.yml, the benches' stacks): they must be there to reach the main thread's V8
 * heap, which exists before any of our code runs.
 *
 * --max-semi-space-size=16: Node 24's V8 lets the main thread's young generation grow to 128 MB
 * (semi-spaces of 64 MB). Under load the worker filled it and kept it resident while its
 * generations sat parked (bench:idle); 16 MB semi-spaces, Node 20's size, keep scavenges cheap.
 * The workflow thread gets a smaller one from main.ts.
 *
 * --heap-growing-percent=25: after each full collection V8 lets a heap grow to 1.25 × what
 * survived, where it would allow up to 4 × a busy one. A burst of generations then leaves less
 * garbage to sit in the old generations of both threads (V8's memory reducer only sometimes comes
 * back to it at rest): bench:idle at 10,000 parked, 479 MB at rest without it, 274 MB with it; CPU
 * per lifecycle of the worker within the run-to-run spread (bench:lifecycle, docs/capacity.md).
 */
export const workerNodeOptions: readonly string[] = ['--max-semi-space-size=16', '--heap-growing-percent=25'];
