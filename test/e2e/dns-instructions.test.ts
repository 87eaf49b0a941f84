/**
 * DNS instructions a dashboard can show as they are (docs/customdomains.md, "DNS instructions"):
 * status.dnsRecords, as the real API server stores what the operator wrote, gives each record's
 * name relative to the customer's zone (`@` at an apex) beside the full name, an apex's A/AAAA
 * alternatives when the platform has fixed addresses (and says so when it has none), and every
 * not-yet-verified message says that DNS changes can take up to 48 hours.
 *
 * The first two tests use the stack's operator (no --apex-addresses); the last runs an operator of
 * its own with --apex-addresses 127.0.0.1,::1 (the sandbox target's address, and an IPv6 one).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain, RequiredDnsRecord } from '../../src/api/customdomain.js';
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
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const PROPAGATION = 'DNS changes can take up to 48 hours to propagate';

/**
 * The records as a dashboard shows them: each field printed as it is, no computation. One line per
 * record (type, the name the provider's form asks for, value, TTL), then the zone and full name, the
 * note, and the alternatives.
 */
function dashboard(records: readonly RequiredDnsRecord[]): string[] {
  return records.flatMap((r) => [
    `${r.type} | ${r.relativeName ?? '?'} | ${r.value} | ${r.ttl}`,
    `  in zone ${r.zone ?? '?'} (full name ${r.name})`,
    ...(r.note ? [`  note: ${r.note}`] : []),
    ...(r.alternatives ?? []).map((a) => `  or: ${a.type} | ${a.relativeName} | ${a.value} | ${a.ttl}`),
  ]);
}

function dnsVerifiedMessage(cd: CustomDomain): string {
  return cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message ?? '';
}

describe('DNS instructions from the stack operator (no fixed apex addresses)', () => {
  it('names www.shop.<zone>.co.uk as www.shop in its zone, and says 48 hours while not verified', async () => {
    const ns = unique('dnsi-sub');
    const zone = `${ns}.co.uk`;
    const hostname = `www.shop.${zone}`;
    await createProject(ns);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const missing = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'RecordNotFound');
    expect(dashboard(missing.status?.dnsRecords ?? [])).toEqual([
      `CNAME | www.shop | ${sandbox.platformCnameTarget} | 3600`,
      `  in zone ${zone} (full name ${hostname})`,
    ]);
    expect(dnsVerifiedMessage(missing)).toContain(PROPAGATION);
    expect(missing.status?.observed?.message).toContain(PROPAGATION);

    // A CNAME to another value: still not verified, still the propagation note.
    await dns.setCname(hostname, 'old-host.example.net');
    await requestVerify(ns, 'www');
    const mismatch = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'CNAMEMismatch');
    expect(dnsVerifiedMessage(mismatch)).toContain(PROPAGATION);
    expect(mismatch.status?.conditions?.find((c) => c.type === 'Ready')?.message).toContain(PROPAGATION);
  });

  it('names an apex @ with ALIAS/ANAME, and says the platform has no fixed addresses for A/AAAA', async () => {
    const ns = unique('dnsi-apex');
    const apex = `${ns}.example`;
    await createProject(ns);
    await createCustomDomain(ns, 'apex', { hostname: apex, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'apex', 'DNSVerified', 'False', 'RecordNotFound');
    const [alias] = cd.status?.dnsRecords ?? [];
    expect(dashboard(cd.status?.dnsRecords ?? []).slice(0, 2)).toEqual([
      `ALIAS | @ | ${sandbox.platformCnameTarget} | 3600`,
      `  in zone ${apex} (full name ${apex})`,
    ]);
    expect(alias?.alternatives).toBeUndefined();
    expect(alias?.note).toContain('not every DNS provider supports these');
    expect(alias?.note).toContain('The platform publishes no fixed IP addresses');
    expect(dnsVerifiedMessage(cd)).toContain(PROPAGATION);
  });
});

describe('DNS instructions from an operator with --apex-addresses', () => {
  let stack: ControllerCommand | undefined;
  let operator: OperatorProcess | undefined;

  beforeAll(async () => {
    stack = await stopStackController();
    if (!stack) throw new Error('the stack operator was not found');
    operator = await startOperator(stack, 'dns-instructions', { '--apex-addresses': '127.0.0.1,::1' });
  });

  afterAll(async () => {
    await runAll(
      async () => {
        if (operator) await stopOperator(operator);
      },
      () => restartStackController(stack),
    );
  });

  it('lists the A/AAAA fallback beside the ALIAS, and an A record made from it verifies', async () => {
    const ns = unique('dnsi-addr');
    const apex = `${ns}.example`;
    await createProject(ns);
    await createCustomDomain(ns, 'apex', { hostname: apex, service: { name: 'web' } });
    const cd = await waitFor('the apex to be checked and list its A/AAAA alternatives', async () => {
      const current = await getCustomDomain(ns, 'apex');
      const checked = current.status?.conditions?.some(
        (c) => c.type === 'DNSVerified' && c.reason === 'RecordNotFound',
      );
      return checked && current.status?.dnsRecords?.[0]?.alternatives ? current : undefined;
    });
    expect(dashboard(cd.status?.dnsRecords ?? [])).toEqual([
      `ALIAS | @ | ${sandbox.platformCnameTarget} | 3600`,
      `  in zone ${apex} (full name ${apex})`,
      "  note: An apex cannot hold a CNAME: create an ALIAS or ANAME record (some providers call it CNAME flattening); not every DNS provider supports these. Where yours does not, create the A/AAAA records listed as alternatives instead (the platform's addresses: 127.0.0.1, ::1), and no other A/AAAA records at the apex.",
      '  or: A | @ | 127.0.0.1 | 3600',
      '  or: AAAA | @ | ::1 | 3600',
    ]);
    expect(dnsVerifiedMessage(cd)).toContain(PROPAGATION);

    // The customer's provider has no ALIAS: they create the A record from the alternatives.
    await dns.addA(apex, ['127.0.0.1']);
    await requestVerify(ns, 'apex');
    const verified = await waitForCondition(ns, 'apex', 'DNSVerified', 'True', 'RecordMatches');
    expect(dnsVerifiedMessage(verified)).not.toContain(PROPAGATION);
  });
});
