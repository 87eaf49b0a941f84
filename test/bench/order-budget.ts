/**
 * The order budget's cost per reconcile pass as the waiting keys grow (src/acme/order-budget.ts): two
 * passes of `request` over n waiting keys (the first queues them, the second asks again a second
 * later), for n = 2,500 and 10,000, asked in an order unrelated to their queuedAt. Linear (or
 * n log n) work gives about 4 to 4.5× the time for 4× the keys; a walk of the line per request (to
 * find a position, or the requests ahead) about 16×. Prints each n's best of three runs in ms and
 * the ratios; the unit test checks only the positions the budget answers, not its speed.
 *
 * Usage: `npx tsx test/bench/order-budget.ts`
 */
import { OrderBudget } from '../../src/acme/order-budget.js';
import type { OrderRequest } from '../../src/acme/order-decision.js';

const t0 = Date.parse('2026-11-25T10:00:00.000Z');
const at = (ms: number): Date => new Date(t0 + ms);

/** n requests: every tenth a renewal, every second under one shared registered domain. */
function requests(n: number): OrderRequest[] {
  const all = Array.from({ length: n }, (_, i): OrderRequest => {
    const tenant = `tenant${i % 200}`;
    const shared = i % 2 === 1;
    const registeredDomain = shared ? 'shared.example' : `d${i}.${tenant}.test`;
    return {
      key: `${tenant}/d${i}`,
      tenant,
      hostname: shared ? `d${i}.shared.example` : `www.${registeredDomain}`,
      registeredDomain,
      kind: i % 10 === 0 ? 'renewal' : 'first-issuance',
      queuedAt: at(-((i * 7919) % n) * 1_000),
    };
  });
  return all.map((r, i) => all[(i * 3_001) % n] ?? r);
}

/** The two passes over n keys, ms each. */
function passes(n: number): { first: number; second: number } {
  const budget = new OrderBudget();
  for (let i = 0; i < 300; i++) budget.recordPastOrder(at(-i * 1_000));
  for (let i = 0; i < 50; i++) budget.recordPastCertificate('shared.example', at(-i * 1_000));
  const asked = requests(n);
  const started = performance.now();
  for (const r of asked) budget.request(r, at(0));
  const first = performance.now() - started;
  for (const r of asked) budget.request(r, at(1_000));
  return { first, second: performance.now() - started - first };
}

function best(n: number, runs = 3): { first: number; second: number } {
  let first = Infinity;
  let second = Infinity;
  for (let i = 0; i < runs; i++) {
    const p = passes(n);
    first = Math.min(first, p.first);
    second = Math.min(second, p.second);
  }
  return { first, second };
}

passes(2_500); // warm-up: the JIT compiles the paths before the measured runs
const quarter = best(2_500);
const full = best(10_000);
process.stdout.write(
  `order budget: 2,500 keys ${quarter.first.toFixed(1)} + ${quarter.second.toFixed(1)} ms, ` +
    `10,000 keys ${full.first.toFixed(1)} + ${full.second.toFixed(1)} ms (first + second pass), ` +
    `ratios ${(full.first / quarter.first).toFixed(2)} and ${(full.second / quarter.second).toFixed(2)} ` +
    `(linear ≈ 4, a walk of the line per request ≈ 16)\n`,
);
