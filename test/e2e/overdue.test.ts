/**
 * Spec §3 / §7.3: a domain verified but still without a certificate after the threshold (30 min in
 * production) gets CertificateOverdue with the likely causes and the last failure. Run with an
 * operator whose threshold is 3 s and whose challenge server is not where the CA connects, so every
 * order fails at the HTTP-01 self-check (challenge requests not reaching the platform). The threshold
 * holds whatever the certificate waits for: a CAA refusal (before any order) and, with an operator
 * whose ACME order budget is one order an hour (two domains for it), an order
 * waiting for its turn are overdue too, with what they wait for in the message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  freePort,
  restartStackController,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
  runAll,
} from './support/stack-controller.js';

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'overdue', {
    '--certificate-overdue-seconds': '3',
    '--http01-listen-address': `127.0.0.1:${await freePort()}`,
  });
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

describe('no certificate after the threshold', () => {
  it('says the certificate is overdue, why it may be, and what the last attempt said', async () => {
    const ns = unique('overdue');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'CertificateOverdue', 60_000);
    const message = cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
    expect(cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.status).toBe('True');
    expect(message).toMatch(/No certificate \d+ seconds after verification/);
    expect(message).toContain('CAA');
    expect(message).toContain('/.well-known/acme-challenge/');
    expect(message).toContain('portico.dev/verify-requested-at');
    // Once the order has failed, the overdue message also carries the failure.
    const withFailure = await waitFor('the last failure in the overdue message', async () => {
      const current = await getCustomDomain(ns, 'www');
      const c = current.status?.conditions?.find((x) => x.type === 'CertificateReady');
      return c?.reason === 'CertificateOverdue' && c.message.includes('The last attempt failed')
        ? c
        : undefined;
    });
    expect(withFailure.message).toContain('did not serve the challenge response');
  });
});

/**
 * The CertificateOverdue message of `ns/www` once it carries `cause` (the overdue reason comes at the
 * threshold; what the certificate waits for is known once the operator has looked).
 */
async function overdueMessageWith(ns: string, cause: string): Promise<string> {
  return waitFor(`CertificateOverdue naming ${cause}`, async () => {
    const current = await getCustomDomain(ns, 'www');
    const c = current.status?.conditions?.find((x) => x.type === 'CertificateReady');
    if (c?.reason === 'CertificateOverdue' && c.message.includes(cause)) return c.message;
    throw new Error(`CertificateReady is ${c?.reason ?? 'absent'}: ${c?.message ?? ''}`);
  });
}

describe('no certificate after the threshold, for a reason other than a failed order', () => {
  it('is overdue when CAA forbids the CA, and says so with the CAA reason', async () => {
    const ns = unique('overdue-caa');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    // At the customer's zone (the hostname's parent): the hostname itself holds the CNAME, and the
    // CAA search climbs from the hostname (RFC 8659 §3).
    const zone = `${ns}.example`;
    await dns.post('/add-caa', { host: zone, policies: [{ tag: 'issue', value: 'digicert.com' }] });
    try {
      await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
      const message = await overdueMessageWith(ns, 'The last attempt failed (CAAForbidsIssuance):');
      expect(message).toMatch(/No certificate \d+ seconds after verification/);
      expect(message).toContain('digicert.com');
    } finally {
      await dns.post('/clear-caa', { host: zone });
    }
  });

  it('is overdue while the order waits for the ACME budget, and says where it is in line', async () => {
    if (operator) await stopOperator(operator);
    operator = undefined;
    if (!stack) throw new Error('the stack operator was not found');
    operator = await startOperator(stack, 'overdue-queued', {
      '--certificate-overdue-seconds': '3',
      '--http01-listen-address': `127.0.0.1:${await freePort()}`,
      '--acme-orders-per-window': '1',
      '--acme-order-window-seconds': '3600',
    });
    const ns = unique('overdue-queued');
    await createProject(ns);
    // Two domains for a budget of one order an hour: at most one is ordered (the orders already in
    // the cluster's statuses may have spent it), so at least one waits for its turn.
    const names = ['first', 'www'];
    for (const name of names) {
      const hostname = `${name}.${ns}.example`;
      await dns.setCname(hostname, sandbox.platformCnameTarget);
      await createCustomDomain(ns, name, { hostname, service: { name: 'web' } });
    }
    const message = await waitFor(
      'CertificateOverdue naming the OrderQueued wait on one of them',
      async () => {
        for (const name of names) {
          const c = (await getCustomDomain(ns, name)).status?.conditions?.find(
            (x) => x.type === 'CertificateReady',
          );
          if (c?.reason === 'CertificateOverdue' && c.message.includes('The order is waiting (OrderQueued):'))
            return c.message;
        }
        return undefined;
      },
    );
    expect(message).toMatch(
      /Queued for the CA's order budget \(1 new orders per hour\): position \d+, expected at/,
    );
  });
});
