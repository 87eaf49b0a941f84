/**
 * The work queue's cost per operation as the queue grows (src/kube/work-queue.ts): add (promote to
 * normal priority), remove and get/done over a queue of n low-priority keys, for n = 25,000 and
 * 100,000. Linear work gives about 4× the time for 4× the keys; an O(queue length) step per
 * operation (indexOf, splice or shift over one array) about 16×. Prints each n's best of three runs
 * in ms and the ratio; the unit test checks only what the queue hands out, not its speed.
 *
 * Usage: `npx tsx test/bench/work-queue.ts`
 */
import { WorkQueue } from '../../src/kube/work-queue.js';

/** One pass over n keys, ms: promote every second key, remove every fourth, then drain. */
async function pass(n: number): Promise<number> {
  const keys = Array.from({ length: n }, (_, i) => `ns${i % 1_000}/${i}`);
  const q = new WorkQueue();
  for (const key of keys) q.addLowPriority(key);
  const started = performance.now();
  for (let i = 0; i < n; i += 2) q.add(keys[i] ?? '');
  for (let i = 1; i < n; i += 4) q.remove(keys[i] ?? '');
  while (q.length > 0) {
    const key = await q.get();
    if (key !== undefined) q.done(key);
  }
  return performance.now() - started;
}

async function best(n: number, runs = 3): Promise<number> {
  let min = Infinity;
  for (let i = 0; i < runs; i++) min = Math.min(min, await pass(n));
  return min;
}

await pass(10_000); // warm-up: the JIT compiles the paths before the measured runs
const quarter = await best(25_000);
const full = await best(100_000);
process.stdout.write(
  `work queue: 25,000 keys ${quarter.toFixed(1)} ms, 100,000 keys ${full.toFixed(1)} ms, ratio ${(full / quarter).toFixed(2)} (linear ≈ 4, quadratic ≈ 16)\n`,
);
