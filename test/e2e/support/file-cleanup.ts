/**
 * Every e2e file shares one stack, and the stack's operator serves every CustomDomain in it: a
 * domain a file leaves behind is still reconciled, issued and renewed while the next files run, and
 * spends their CA's order budget and their operator's time (twice it skewed another file's counts).
 * This setup file (vitest `setupFiles`, run in each test file) deletes, after the file's own
 * `afterAll` hooks, every CustomDomain created since the file started, and waits until their
 * finalizers are done.
 *
 * A domain that is still there after `CLEANUP_WAIT_MS` is reported on stderr, not thrown: the clean-up
 * never hides the file's own result.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import type { CustomDomain } from '../../../src/api/customdomain.js';
import { customDomainApi, kube } from './cluster.js';

/** How long the clean-up waits for the deleted domains' finalizers, ms. */
const CLEANUP_WAIT_MS = 30_000;

/** Unix time, ms, of the file's start, floored to the second (creationTimestamp has seconds only). */
let fileStartMs = 0;

beforeAll(() => {
  fileStartMs = Math.floor(Date.now() / 1000) * 1000;
});

/** The CustomDomains of the whole cluster created at or after `sinceMs` (Unix time, ms). */
async function domainsCreatedSince(sinceMs: number): Promise<{ namespace: string; name: string }[]> {
  const list = (await kube().custom.listClusterCustomObject({ ...customDomainApi })) as {
    items: CustomDomain[];
  };
  return list.items
    .filter((cd) => Date.parse(String(cd.metadata?.creationTimestamp ?? 0)) >= sinceMs)
    .map((cd) => ({ namespace: cd.metadata?.namespace ?? '', name: cd.metadata?.name ?? '' }));
}

// Registered before the file's own hooks, so it runs after them (vitest runs after-hooks in reverse):
// a file that stopped the stack's operator has started it again by then, and it runs the finalizers.
afterAll(async () => {
  const file = expect.getState().testPath ?? 'e2e file';
  try {
    const left = await domainsCreatedSince(fileStartMs);
    if (left.length === 0) return;
    const { custom } = kube();
    await Promise.all(
      left.map(({ namespace, name }) =>
        custom.deleteNamespacedCustomObject({ ...customDomainApi, namespace, name }).catch(() => undefined),
      ),
    );
    const deadline = Date.now() + CLEANUP_WAIT_MS;
    let remaining = left.length;
    while (Date.now() < deadline) {
      remaining = (await domainsCreatedSince(fileStartMs)).length;
      if (remaining === 0) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    process.stderr.write(
      `${file}: ${remaining} of the ${left.length} CustomDomains it left were still there ${CLEANUP_WAIT_MS} ms after their deletion\n`,
    );
  } catch (err) {
    process.stderr.write(`${file}: clean-up of its CustomDomains failed: ${(err as Error).message}\n`);
  }
}, CLEANUP_WAIT_MS + 30_000);
