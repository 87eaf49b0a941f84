/**
 * Re-verify of a verified domain with no certificate after 30 minutes starts a fresh certificate
 * attempt, for an order stuck in flight too (docs/customdomains.md, "Verify and re-verify"). The
 * test runs its own operator with a 3 s overdue threshold, whose ACME directory is the recording
 * proxy in front of the sandbox's real Pebble (support/acme-fault-proxy.ts): the proxy holds the
 * domain's first challenge response before Pebble sees it, so that order stays pending at the CA,
 * in flight, past the threshold (CertificateOverdue). A verify request (the annotation `kubectl
 * portico verify` sets) then abandons it: a second new-order reaches the CA, CertificateOverdue
 * clears at once, and the second order, not held, makes the domain Ready. The abandoned order is
 * counted as cancelled, never as failed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAcmeFaultProxy, type AcmeFaultProxy } from './support/acme-fault-proxy.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  waitForOperatorStarted,
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

let proxy: AcmeFaultProxy | undefined;
let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  proxy = await startAcmeFaultProxy(sandbox.sandboxDir, sandbox.acmeDirectoryUrl, sandbox.acmeCaBundle);
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  const started = await startOperator(stack, 'reverify', {
    '--acme-directory-url': proxy.directoryUrl,
    '--certificate-overdue-seconds': '3',
    // The held challenge response must not time out before the test re-verifies.
    '--acme-request-timeout-seconds': '120',
  });
  operator = started;
  await waitForOperatorStarted(started);
}, 120_000);

afterAll(async () => {
  await runAll(
    // The proxy first: a request it still holds would keep the operator from exiting.
    async () => proxy?.stop(),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

/** This operator's `portico_acme_orders_total{result}`. */
async function ordersTotal(result: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${operator?.metricsPort ?? 0}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`portico_acme_orders_total{result="${result}"}`));
  return Number(line?.split(' ')[1] ?? 0);
}

describe('re-verify with an order stuck in flight past the overdue threshold', () => {
  it('abandons the order, places a second one, clears CertificateOverdue, and goes Ready', async () => {
    if (!proxy) throw new Error('the ACME proxy did not start');
    const acme = proxy;
    const ns = unique('reverify');
    const hostname = `www.${ns}.example`;
    const newOrders = () =>
      acme.exchanges.filter((x) => x.kind === 'new-order' && x.hostnames.includes(hostname));
    const held = acme.hold((x) => x.kind === 'challenge-response' && x.hostnames.includes(hostname));
    const failedBefore = await ordersTotal('failed');

    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    await held.arrived;
    const overdue = await waitForCondition(
      ns,
      'www',
      'CertificateReady',
      'False',
      'CertificateOverdue',
      30_000,
    );
    expect(overdue.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message).toMatch(
      /No certificate \d+ seconds after verification/,
    );
    expect(newOrders()).toHaveLength(1);

    const requested = new Date().toISOString();
    await requestVerify(ns, 'www', requested);
    const answered = await waitFor('the verify request acted on', async () => {
      const cd = await getCustomDomain(ns, 'www');
      return cd.status?.lastVerifyRequest === requested ? cd : undefined;
    });
    // The status write that answers the request no longer says overdue: the clock restarted with it.
    expect(answered.status?.conditions?.find((c) => c.type === 'CertificateReady')?.reason).not.toBe(
      'CertificateOverdue',
    );
    await waitFor(
      'a second new-order at the CA',
      () => (newOrders().length === 2 ? true : undefined),
      10_000,
    );

    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 60_000);
    expect(newOrders()).toHaveLength(2);
    expect(await ordersTotal('cancelled')).toBeGreaterThanOrEqual(1);
    expect(await ordersTotal('failed')).toBe(failedBefore);
    held.release();
  }, 120_000);
});
