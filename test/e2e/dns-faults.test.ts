/**
 * DNS faults on a verified domain (docs/customdomains.md): a DNS fault never takes a Live domain
 * out of Ready. A resolver failure (SERVFAIL from pebble-challtestsrv; a resolver that never
 * answers, a UDP port that swallows every query) leaves the domain verified however long it lasts;
 * a definite answer that no longer matches unverifies it only after the grace period (8 s here,
 * `--dns-mismatch-grace-seconds`). The checks are forced with the verify annotation, so each fault
 * is looked at at once.
 */
import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  kube,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const GRACE_SECONDS = 8;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let silent: Socket | undefined;

async function runOperator(name: string, overrides: Record<string, string> = {}): Promise<void> {
  if (operator) await stopOperator(operator);
  operator = undefined;
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, name, {
    '--dns-mismatch-grace-seconds': String(GRACE_SECONDS),
    ...overrides,
  });
}

beforeAll(async () => {
  stack = await stopStackController();
  await runOperator('dns-faults');
  silent = createSocket('udp4');
  silent.on('message', () => undefined);
  silent.bind(0, '127.0.0.1');
  await once(silent, 'listening');
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () =>
      new Promise<void>((resolve) => {
        if (silent) silent.close(resolve);
        else resolve();
      }),
    () => restartStackController(stack),
  );
});

const conditionOf = (cd: CustomDomain, type: string) => cd.status?.conditions?.find((c) => c.type === type);

/** A Live domain of a new project: its namespace and hostname. */
async function liveDomain(prefix: string): Promise<{ ns: string; hostname: string }> {
  const ns = unique(prefix);
  const hostname = `www.${ns}.example`;
  await createProject(ns);
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
  await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
  return { ns, hostname };
}

/** Requests a verify and waits until the operator has answered it with a check that found `result`. */
async function verifiedWith(ns: string, result: string, timeoutMs = 60_000): Promise<CustomDomain> {
  const requested = new Date().toISOString();
  await requestVerify(ns, 'www', requested);
  return waitFor(
    `a check answering the verify request with ${result}`,
    async () => {
      const cd = await getCustomDomain(ns, 'www');
      return cd.status?.lastVerifyRequest === requested && cd.status.observed?.result === result
        ? cd
        : undefined;
    },
    timeoutMs,
  );
}

async function eventReasons(ns: string): Promise<string[]> {
  const events = await kube().core.listNamespacedEvent({ namespace: ns });
  return events.items
    .filter((e) => e.involvedObject.name === 'www')
    .map((e) => `${e.type ?? ''}/${e.reason ?? ''}`);
}

describe('DNS faults on a Live domain', () => {
  it('keeps it Ready through SERVFAIL and a resolver that never answers, with no Warning Events', async () => {
    const { ns, hostname } = await liveDomain('dns-fault');
    const before = await eventReasons(ns);

    await dns.post('/set-servfail', { host: hostname });
    try {
      const servfail = await verifiedWith(ns, 'DNSServerFailure');
      expect(conditionOf(servfail, 'Ready')?.status).toBe('True');
      expect(servfail.status?.phase).toBe('Live');
      expect(conditionOf(servfail, 'DNSVerified')).toMatchObject({ status: 'True', reason: 'RecordMatches' });
      expect(conditionOf(servfail, 'DNSVerified')?.message).toContain(
        'the latest check failed (DNSServerFailure',
      );
    } finally {
      await dns.post('/clear-servfail', { host: hostname });
    }

    // The same operator, asking a resolver that never answers.
    const port = silent?.address().port;
    await runOperator('dns-faults-silent', {
      '--dns-server': `127.0.0.1:${port}`,
      '--dns-timeout-ms': '300',
    });
    const timedOut = await verifiedWith(ns, 'DNSTimeout');
    expect(conditionOf(timedOut, 'Ready')?.status).toBe('True');
    expect(conditionOf(timedOut, 'DNSVerified')).toMatchObject({ status: 'True', reason: 'RecordMatches' });
    // Re-checked on the transient schedule (15 s), still Ready.
    const next =
      Date.parse(timedOut.status?.observed?.nextCheckAt ?? '') -
      Date.parse(timedOut.status?.observed?.checkedAt ?? '');
    expect(next).toBe(15_000);
    await runOperator('dns-faults');

    // No Event at all was recorded for the faults (a repeated Event would only raise a count).
    const after = await eventReasons(ns);
    expect(after.filter((r) => r.startsWith('Warning/'))).toEqual([]);
    expect(after.sort()).toEqual(before.sort());
    // DNS answers again: the check confirms the record and the message is the verdict's own.
    const healed = await verifiedWith(ns, 'RecordMatches');
    expect(conditionOf(healed, 'DNSVerified')?.message).not.toContain('latest check');
  });

  it('unverifies it on a definite mismatch only after the grace period', async () => {
    const { ns, hostname } = await liveDomain('dns-mismatch');
    await dns.setCname(hostname, `elsewhere.${ns}.example`);
    const first = await verifiedWith(ns, 'CNAMEMismatch');
    const failingSince = Date.parse(first.status?.observed?.failingSince ?? '');
    expect(Number.isNaN(failingSince)).toBe(false);
    expect(conditionOf(first, 'Ready')?.status).toBe('True');
    const inGrace = await eventReasons(ns);
    expect(conditionOf(first, 'DNSVerified')?.message).toContain(
      `stands until ${new Date(failingSince + GRACE_SECONDS * 1000).toISOString()}`,
    );

    const unverified = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'CNAMEMismatch', 60_000);
    const turned = Date.parse(conditionOf(unverified, 'DNSVerified')?.lastTransitionTime ?? '');
    // lastTransitionTime has second precision.
    expect(turned).toBeGreaterThanOrEqual(Math.floor(failingSince / 1000) * 1000 + GRACE_SECONDS * 1000);
    expect(conditionOf(unverified, 'Ready')?.status).toBe('False');
    // The Warning Events come with the transition, not during the grace period.
    expect(inGrace.filter((r) => r.startsWith('Warning/'))).toEqual([]);
    expect(await eventReasons(ns)).toContain('Warning/CNAMEMismatch');
  });
});
