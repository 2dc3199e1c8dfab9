/**
 * Node's options for the worker process, given on its command line (`npm run worker`,
 * docker-compose.yml, the benches' stacks): they must be there to reach the main thread's V8
 * heap, which exists before any of our code runs.
 *
 * --max-semi-space-size=16: Node 24's V8 lets the main thread's young generation grow to 128 MB
 * (semi-spaces of 64 MB). Under load the worker filled it and kept it resident while its
 * generations sat parked (bench:idle); 16 MB semi-spaces, Node 20's size, keep scavenges cheap.
 * The workflow thread gets a smaller one from main.ts.
 */
export const workerNodeOptions: readonly string[] = ['--max-semi-space-size=16'];
