/**
 * Takeover (docs/customdomains.md, "Ownership verification" and "Dangling records"): ownership
 * verification by the TXT record _portico-challenge.<hostname>, and the dangling-record report, on
 * the real stack (kube-apiserver, Pebble, pebble-challtestsrv).
 *
 * - `recently-claimed` (the default): a hostname never held by another project goes Live on its
 *   CNAME alone; one released by another project (its CustomDomain deleted, the CNAME left in
 *   place) needs the TXT record before it is verified, ordered or routed.
 * - `always`: every new domain needs it; once found, the record may be removed.
 * - A Live domain whose CNAME moves away is reported as DanglingRecord after
 *   `--dangling-after-seconds` (here 8 s, with a 3 s grace).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain, RequiredDnsRecord } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  deleteCustomDomain,
  dns,
  getCustomDomain,
  kube,
  requestVerify,
  customDomainApi,
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

const GRACE_SECONDS = 3;
const DANGLING_SECONDS = 8;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

async function runOperator(name: string, overrides: Record<string, string>): Promise<void> {
  if (operator) await stopOperator(operator);
  operator = undefined;
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, name, {
    '--dns-mismatch-grace-seconds': String(GRACE_SECONDS),
    '--dangling-after-seconds': String(DANGLING_SECONDS),
    ...overrides,
  });
}

beforeAll(async () => {
  stack = await stopStackController();
  await runOperator('takeover', { '--ownership-verification': 'recently-claimed' });
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

const conditionOf = (cd: CustomDomain, type: string) => cd.status?.conditions?.find((c) => c.type === type);
const txtOf = (cd: CustomDomain): RequiredDnsRecord | undefined =>
  cd.status?.dnsRecords?.find((r) => r.type === 'TXT');

/** pebble-challtestsrv keys its TXT records by FQDN. */
const setTxt = (name: string, value: string) => dns.post('/set-txt', { host: `${name}.`, value });
const clearTxt = (name: string) => dns.post('/clear-txt', { host: `${name}.` });

async function ingressExists(namespace: string, name: string): Promise<boolean> {
  try {
    await kube().networking.readNamespacedIngress({ namespace, name });
    return true;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return false;
    throw err;
  }
}

async function eventReasons(ns: string): Promise<string[]> {
  const events = await kube().core.listNamespacedEvent({ namespace: ns });
  return events.items
    .filter((e) => e.involvedObject.name === 'www')
    .map((e) => `${e.type ?? ''}/${e.reason ?? ''}`);
}

/** Asserts that `cd` waits for its TXT record, and returns the record status.dnsRecords shows. */
function expectOwnershipWanted(cd: CustomDomain, hostname: string, reason: string): RequiredDnsRecord {
  const txt = txtOf(cd);
  expect(txt?.name).toBe(`_portico-challenge.${hostname}`);
  expect(txt?.value).toMatch(/^portico-verification=[A-Za-z0-9_-]{43}$/);
  const dnsVerified = conditionOf(cd, 'DNSVerified');
  expect(dnsVerified).toMatchObject({ status: 'False', reason: 'OwnershipNotVerified' });
  expect(dnsVerified?.message).toContain(
    `create TXT ${txt?.name ?? ''} with the value "${txt?.value ?? ''}"`,
  );
  expect(cd.status?.ownership).toMatchObject({ hostname, required: true, reason });
  expect(cd.status?.ownership?.verifiedAt).toBeUndefined();
  // Not verified: no certificate order and no routing.
  expect(conditionOf(cd, 'CertificateReady')?.reason).toBe('AwaitingDNSVerification');
  expect(conditionOf(cd, 'Routed')?.status).toBe('False');
  expect(conditionOf(cd, 'Ready')?.status).toBe('False');
  if (!txt) throw new Error('no TXT record in status.dnsRecords');
  return txt;
}

describe('ownership verification, recently-claimed', () => {
  it('lets a never-claimed hostname go Live on its CNAME, and asks the next project for the TXT record', async () => {
    const first = unique('takeover-a');
    const second = unique('takeover-b');
    const hostname = `www.${first}.example`;
    await createProject(first);
    await createProject(second);
    await dns.setCname(hostname, sandbox.platformCnameTarget);

    await createCustomDomain(first, 'www', { hostname, service: { name: 'web' } });
    const live = await waitForCondition(first, 'www', 'Ready', 'True', undefined, 120_000);
    expect(live.status?.ownership).toMatchObject({ required: false, reason: 'NotRecentlyClaimed' });
    expect(txtOf(live)).toBeUndefined();

    // Another project asks for the hostname while the first holds it, then the first removes its
    // domain and leaves the CNAME in place: the dangling record a takeover would use.
    await createCustomDomain(second, 'www', { hostname, service: { name: 'web' } });
    await waitForCondition(second, 'www', 'Accepted', 'False', 'HostnameAlreadyClaimed');
    await deleteCustomDomain(first, 'www');

    const waiting = await waitForCondition(
      second,
      'www',
      'DNSVerified',
      'False',
      'OwnershipNotVerified',
      60_000,
    );
    const txt = expectOwnershipWanted(waiting, hostname, 'RecentlyClaimed');
    expect(conditionOf(waiting, 'Accepted')?.status).toBe('True');
    expect(await ingressExists(second, 'portico-www')).toBe(false);
    expect(await eventReasons(second)).toContain('Warning/OwnershipNotVerified');

    // A TXT record with another value (as a former holder might have left) does not count.
    await setTxt(txt.name, 'portico-verification=not-the-token');
    await requestVerify(second, 'www');
    const wrong = await waitFor(
      'a check that found the wrong TXT value',
      async () => {
        const cd = await getCustomDomain(second, 'www');
        return conditionOf(cd, 'DNSVerified')?.message.includes('"portico-verification=not-the-token"')
          ? cd
          : undefined;
      },
      30_000,
    );
    expect(conditionOf(wrong, 'DNSVerified')?.reason).toBe('OwnershipNotVerified');

    await setTxt(txt.name, txt.value);
    await requestVerify(second, 'www');
    const taken = await waitForCondition(second, 'www', 'Ready', 'True', undefined, 120_000);
    expect(taken.status?.ownership?.verifiedAt).toBeDefined();
    expect(txtOf(taken)).toBeUndefined();
    await clearTxt(txt.name);
  });
});

describe('a dangling record', () => {
  it('reports a Live domain whose DNS points elsewhere for longer than --dangling-after-seconds', async () => {
    const ns = unique('dangling');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);

    await dns.setCname(hostname, `elsewhere.${ns}.example`);
    await requestVerify(ns, 'www');
    const moved = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'CNAMEMismatch', 60_000);
    const failingSince = Date.parse(moved.status?.observed?.failingSince ?? '');
    expect(Number.isNaN(failingSince)).toBe(false);

    const dangling = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'DanglingRecord', 60_000);
    const c = conditionOf(dangling, 'DNSVerified');
    // lastTransitionTime moves only with the status (False since the grace ended): the check that
    // first reported it is at least --dangling-after-seconds after failingSince.
    expect(Date.parse(dangling.status?.observed?.checkedAt ?? '')).toBeGreaterThanOrEqual(
      failingSince + DANGLING_SECONDS * 1000,
    );
    expect(dangling.status?.observed?.failingSince).toBe(new Date(failingSince).toISOString());
    expect(c?.message).toContain(`since ${new Date(failingSince).toISOString()}`);
    expect(c?.message).toContain(`elsewhere.${ns}.example`);
    expect(c?.message).toContain('delete this CustomDomain');
    // Still attached: the routing stays (the customer may come back), and the platform is told.
    expect(await ingressExists(ns, 'portico-www')).toBe(true);
    expect(await eventReasons(ns)).toContain('Warning/DanglingRecord');
    const metrics = async () =>
      (await (await fetch(`http://127.0.0.1:${operator?.metricsPort ?? 0}/metrics`)).text())
        .split('\n')
        .filter((l) => l.startsWith('portico_customdomain_dangling{') && l.includes(`namespace="${ns}"`));
    expect(await metrics()).toEqual([
      `portico_customdomain_dangling{namespace="${ns}",name="www",hostname="${hostname}"} 1`,
    ]);

    // The customer restores the record: the report ends.
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await requestVerify(ns, 'www');
    const restored = await waitForCondition(ns, 'www', 'DNSVerified', 'True', 'RecordMatches', 60_000);
    expect(restored.status?.observed?.failingSince).toBeUndefined();
    expect(await metrics()).toEqual([]);
  });
});

describe('ownership verification, always', () => {
  it('keeps a domain with a correct CNAME unverified until its TXT record is found, then goes Live', async () => {
    await runOperator('takeover-always', { '--ownership-verification': 'always' });
    const ns = unique('takeover-always');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });

    const waiting = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'OwnershipNotVerified', 60_000);
    const txt = expectOwnershipWanted(waiting, hostname, 'PolicyAlways');
    expect(waiting.status?.dnsRecords?.map((r) => r.type)).toEqual(['CNAME', 'TXT']);
    expect(await ingressExists(ns, 'portico-www')).toBe(false);

    await setTxt(txt.name, txt.value);
    await requestVerify(ns, 'www');
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
    expect(live.status?.ownership?.verifiedAt).toBeDefined();

    // The record may be removed once found: the next check verifies by the CNAME alone.
    await clearTxt(txt.name);
    const requested = new Date().toISOString();
    await requestVerify(ns, 'www', requested);
    const again = await waitFor(
      'a check after the TXT record was removed',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        return cd.status?.lastVerifyRequest === requested ? cd : undefined;
      },
      30_000,
    );
    expect(conditionOf(again, 'DNSVerified')).toMatchObject({ status: 'True', reason: 'RecordMatches' });
    expect(conditionOf(again, 'Ready')?.status).toBe('True');
  });

  it('does not take a decision written into status by someone else: a status writer cannot skip the TXT record', async () => {
    const ns = unique('takeover-forged');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const waiting = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'OwnershipNotVerified', 60_000);
    expectOwnershipWanted(waiting, hostname, 'PolicyAlways');
    expect(waiting.status?.ownership?.proof).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // Anyone allowed to write the status subresource (here the admin) writes two forgeries: a
    // decision that does not require the record, and the operator's own decision with a verifiedAt.
    const forgeries = [
      { hostname, required: false, reason: 'PolicyNever', message: 'not asked' },
      { ...waiting.status?.ownership, verifiedAt: new Date().toISOString() },
    ];
    for (const ownership of forgeries) {
      const current = await getCustomDomain(ns, 'www');
      await kube().custom.replaceNamespacedCustomObjectStatus({
        ...customDomainApi,
        namespace: ns,
        name: 'www',
        body: { ...current, status: { ...current.status, ownership } },
      });
      const requested = new Date().toISOString();
      await requestVerify(ns, 'www', requested);
      const checked = await waitFor(
        'a check after the forged status',
        async () => {
          const cd = await getCustomDomain(ns, 'www');
          return cd.status?.lastVerifyRequest === requested ? cd : undefined;
        },
        30_000,
      );
      expectOwnershipWanted(checked, hostname, 'PolicyAlways');
      expect(await ingressExists(ns, 'portico-www')).toBe(false);
    }
  });
});
