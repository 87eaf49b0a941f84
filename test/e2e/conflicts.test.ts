/**
 * A 409 Conflict on the operator's write paths (docs/reliability.md, "Custom domains: faults of the
 * parts Portico depends on"): the test writes the same objects as the operator while it reconciles,
 * so that the operator's writes carry a stale `resourceVersion` (or a stale uid precondition) and
 * the API server answers 409. The operator converges, and without a hot loop:
 * `portico_reconcile_total` of the stack's operator counts the conflicts, and barely moves once the
 * test stops writing.
 *
 * Write paths with a precondition, and how each is provoked:
 * - the finalizer (merge patch with `resourceVersion`) and the status (replace of `/status` with
 *   `resourceVersion`): verify requests (the `portico.dev/verify-requested-at` annotation, which
 *   queues a reconcile each time its value changes) and a hand-written status, written in a loop
 *   while the domain is created, verified and issued;
 * - the finalizer's removal (merge patch with `resourceVersion`): annotations written in a loop
 *   while the domain is being removed.
 * The Secret and the Ingress are written with server-side apply and `force`, which never answers
 * 409. Their deletes carry a `uid` precondition, which answers 409 only when the object was
 * replaced between the operator's read and its delete: a window of milliseconds that this test
 * does not try to hit.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  customDomainApi,
  deleteCustomDomain,
  dns,
  getCustomDomain,
  kube,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { sleep, tlsSecrets } from './support/proxied-operator.js';
import { reconcileCount } from './support/stack-controller.js';

const target = sandbox.platformCnameTarget;
const CONTROLLER = 'customdomain';
/** How long the test keeps writing, ms. */
const WRITING_MS = 8_000;
/** The window in which a converged domain must stay quiet, ms. */
const QUIET_MS = 10_000;
/**
 * Reconciles allowed in QUIET_MS once everything converged, beyond what the operator does in the
 * same time before the test (the other test files' domains have their own schedules). A hot loop
 * (a conflict re-queued after 100 ms, over and over) would count about 100.
 */
const QUIET_RECONCILES = 10;

/** The operator's reconciles in QUIET_MS before this file's tests: its background rate. */
let baseline = 0;

beforeAll(async () => {
  baseline = await reconcilesIn(QUIET_MS);
}, QUIET_MS + 10_000);

const RESULTS = ['success', 'conflict', 'error'] as const;

async function reconciles(): Promise<Record<(typeof RESULTS)[number], number>> {
  const [success, conflict, error] = await Promise.all(
    RESULTS.map((r) => reconcileCount(sandbox.controllerMetricsUrl, CONTROLLER, r)),
  );
  return { success: success ?? 0, conflict: conflict ?? 0, error: error ?? 0 };
}

async function total(): Promise<number> {
  const r = await reconciles();
  return r.success + r.conflict + r.error;
}

/** Runs `write` back to back for `ms` (each failure of the test's own write is ignored); returns the count. */
async function writeFor(ms: number, write: (i: number) => Promise<unknown>, pauseMs = 20): Promise<number> {
  const until = Date.now() + ms;
  let i = 0;
  while (Date.now() < until) {
    i += 1;
    await write(i).catch(() => undefined);
    await sleep(pauseMs);
  }
  return i;
}

/** How many reconciles the operator runs in the next `ms`. */
async function reconcilesIn(ms: number): Promise<number> {
  const before = await total();
  await sleep(ms);
  return (await total()) - before;
}

/** Checks that the operator's reconciles over QUIET_MS stay within its baseline + QUIET_RECONCILES. */
async function expectQuiet(): Promise<void> {
  await sleep(2_000); // the last events of the test's writes drain
  expect(await reconcilesIn(QUIET_MS)).toBeLessThanOrEqual(baseline + QUIET_RECONCILES);
}

/**
 * Creates a Ready domain, then deletes it while its annotations are patched in a loop, and waits
 * until it, its Ingress and its Secret are gone. Returns whether the operator counted a 409 meanwhile.
 */
async function removeWhileTouched(attempt: number): Promise<boolean> {
  const ns = unique(`conflict-rm${attempt}`);
  const hostname = `www.${ns}.example`;
  await createProject(ns);
  await dns.setCname(hostname, target);
  await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
  await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 90_000);
  const { networking, custom } = kube();
  const start = await reconciles();

  // The CustomDomain touched in a loop from before its deletion until after it is gone.
  const touching = writeFor(WRITING_MS, async (i) => {
    await custom.patchNamespacedCustomObject({
      ...customDomainApi,
      namespace: ns,
      name: 'www',
      body: [{ op: 'add', path: '/metadata/annotations', value: { 'test.portico.dev/touch': String(i) } }],
    });
  });
  await sleep(500);
  await deleteCustomDomain(ns, 'www');
  await touching;

  await waitFor(
    'the CustomDomain, its Ingress and its Secret to be gone',
    async () => {
      const left = await networking.listNamespacedIngress({ namespace: ns });
      const domain = await getCustomDomain(ns, 'www').catch((err: unknown) => {
        if ((err as { code?: number }).code === 404) return undefined;
        throw err;
      });
      const secrets = await tlsSecrets(ns);
      return left.items.length === 0 && secrets.length === 0 && domain === undefined ? true : undefined;
    },
    60_000,
  );
  const after = await reconciles();
  return after.conflict > start.conflict;
}

describe('409 Conflict on the write paths', () => {
  it('on the finalizer and the status: the domain still becomes Ready, then the operator goes quiet', async () => {
    const ns = unique('conflict');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, target);
    const start = await reconciles();
    const { custom } = kube();
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    // Annotations and a status of the test's own, each write a new resourceVersion.
    const writes = await writeFor(
      WRITING_MS,
      async (i) => {
        if (i % 3 === 0) {
          const cd = await getCustomDomain(ns, 'www');
          await custom.replaceNamespacedCustomObjectStatus({
            ...customDomainApi,
            namespace: ns,
            name: 'www',
            body: { ...cd, status: { ...cd.status, phase: 'Pending' } },
          });
        }
        // Last: a status-only change queues nothing (controller.ts, by design), so the test's
        // status is corrected by the reconcile this verify request queues.
        await requestVerify(ns, 'www', `touch-${i}`);
      },
      50,
    );
    expect(writes).toBeGreaterThan(20);

    // Ready, and the test's own status replaced by the operator's.
    const ready = await waitFor(
      'www Ready and Live',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const r = cd.status?.conditions?.find((c) => c.type === 'Ready');
        return r?.status === 'True' && cd.status?.phase === 'Live' ? cd : undefined;
      },
      90_000,
    );
    expect(ready.metadata.finalizers).toContain(FINALIZER);
    const after = await reconciles();
    expect(after.conflict).toBeGreaterThan(start.conflict);
    await expectQuiet();
    // Quiet, and still right: the operator did not leave the test's status in place.
    expect((await getCustomDomain(ns, 'www')).status?.phase).toBe('Live');
  }, 180_000);

  it('on the finalizer removal: the domain is removed, then the operator goes quiet (skipped when no removal met a 409)', async ({
    skip,
  }) => {
    // A 409 on the finalizer removal needs a touch to land between the operator's read and its
    // patch, which a run does not always produce (none in three removals in one run of six); up to
    // five domains are removed until one did. Each removal is checked (gone, with its Ingress and
    // Secret) whatever happened; when none met a 409, the case this test is about did not happen,
    // and the test says so as skipped rather than passed.
    let conflicted = false;
    let removals = 0;
    for (let attempt = 1; attempt <= 5 && !conflicted; attempt++) {
      conflicted = await removeWhileTouched(attempt);
      removals = attempt;
    }
    if (!conflicted)
      skip(`no 409 on the finalizer removal in ${removals} removals: the race was not produced`);
    await expectQuiet();
  }, 600_000);
});
