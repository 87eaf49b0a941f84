/**
 * Spec §3 / §7.3: a domain verified but still without a certificate after the threshold (30 min in
 * production) gets CertificateOverdue with the likely causes and the last failure. Run with an
 * operator whose threshold is 3 s and whose challenge server is not where the CA connects, so every
 * order fails at the HTTP-01 self-check (challenge requests not reaching the platform).
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
