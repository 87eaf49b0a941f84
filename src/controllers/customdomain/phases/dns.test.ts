import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { CustomDomain, CustomDomainStatus } from '../../../api/customdomain.js';
import type { HostnameAnswers, RRsetAnswer } from '../../../dns/answers.js';
import { ownershipProof } from '../../../dns/ownership.js';
import { withStatusProof } from '../status-proof.js';
import { dnsCheckDue } from '../schedule.js';
import { decideCertificate } from './certificate-decision.js';
import type { CustomDomainReconcilerDeps } from './deps.js';
import { DnsPhase, recordsOrNodata } from './dns.js';

describe('recordsOrNodata', () => {
  it('answers the configured apex addresses as records, or NODATA when there are none', () => {
    expect(recordsOrNodata(['192.0.2.1'])).toEqual({ kind: 'records', values: ['192.0.2.1'] });
    expect(recordsOrNodata([])).toEqual({ kind: 'nodata' });
  });
});

const KEY = Buffer.alloc(32, 7);
const OTHER_KEY = Buffer.alloc(32, 9);
const UID = 'uid-victim';
const HOST = 'www.example.com';
const TARGET = 'sites.platform.test';
const now = new Date('2026-06-01T12:00:00Z');
const minutesAgo = (m: number): string => new Date(now.getTime() - m * 60_000).toISOString();
const inMinutes = (m: number): string => new Date(now.getTime() + m * 60_000).toISOString();

/** DNS as a resolver would answer it: the CNAME to the platform (a dangling record), no TXT. */
function fakeResolver(cname: RRsetAnswer): CustomDomainReconcilerDeps['resolver'] {
  const hostname: HostnameAnswers = { cname, a: { kind: 'nodata' }, aaaa: { kind: 'nodata' } };
  return {
    lookupHostname: () => Promise.resolve(hostname),
    lookupTxt: () => Promise.resolve({ kind: 'nxdomain' }),
    lookupCname: () => Promise.resolve({ kind: 'nxdomain' }),
    lookupAddresses: () => Promise.resolve({ a: { kind: 'nodata' }, aaaa: { kind: 'nodata' } }),
  } as unknown as CustomDomainReconcilerDeps['resolver'];
}

function phase(required: boolean, cname: RRsetAnswer = { kind: 'records', values: [TARGET] }): DnsPhase {
  const deps = {
    platformCnameTarget: TARGET,
    apexAddresses: [],
    dnsMismatchGraceMs: 15 * 60_000,
    danglingAfterMs: 7 * 86_400_000,
    ownership: {
      policy: required ? 'always' : 'never',
      recentMs: 30 * 86_400_000,
      store: { key: () => Promise.resolve(KEY), lastRelease: () => Promise.resolve(undefined) },
    },
    resolver: fakeResolver(cname),
    view: { namespaceUid: () => 'uid-shop' },
    tracker: { clearFailure: () => undefined },
    metrics: { dnsChecksTotal: { inc: () => undefined } },
  };
  return new DnsPhase(deps as unknown as CustomDomainReconcilerDeps);
}

/** The operator's ownership decision, with its genuine proof. */
function ownership(required: boolean): NonNullable<CustomDomainStatus['ownership']> {
  const fields = {
    hostname: HOST,
    required,
    reason: required ? 'PolicyAlways' : 'PolicyNever',
    message: 'decided by the operator',
  };
  return { ...fields, proof: ownershipProof(KEY, UID, fields) };
}

const verifiedCondition = {
  type: 'DNSVerified',
  status: 'True' as const,
  reason: 'RecordMatches',
  message: 'forged',
  lastTransitionTime: minutesAgo(1),
  observedGeneration: 1,
};
const observed = {
  checkedAt: minutesAgo(1),
  nextCheckAt: inMinutes(59),
  result: 'RecordMatches',
  message: 'forged',
  records: [],
};

/** `status` with the proof the operator would have written (key, uid). */
function proved(status: CustomDomainStatus, key = KEY, uid = UID): CustomDomainStatus {
  return withStatusProof(key, uid, HOST, { ...status, observed: status.observed ?? observed });
}

function domain(status: CustomDomainStatus): CustomDomain {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name: 'www', namespace: 'shop', uid: UID, generation: 1 },
    spec: { hostname: HOST, service: { name: 'web', port: 80 } },
    status: { observedGeneration: 1, ...status },
  };
}

const log = pino({ level: 'silent' });

/**
 * Status written by someone other than the operator (anyone who may update `customdomains/status`:
 * the chart's tenant role may not). None of them may verify the domain, keep a `verifiedAt` (which
 * alone gets a route written) or lead to a certificate order.
 */
const forged: { name: string; required: boolean; status: CustomDomainStatus }[] = [
  {
    name: 'DNSVerified=True with no proof, while the ownership record is asked for',
    required: true,
    status: { conditions: [verifiedCondition], observed, ownership: ownership(true) },
  },
  {
    name: 'DNSVerified=True with no proof, no ownership record asked for',
    required: false,
    status: { conditions: [verifiedCondition], observed, ownership: ownership(false) },
  },
  {
    name: 'verifiedAt alone, beside the operator’s own unverified outcome',
    required: true,
    status: {
      conditions: [{ ...verifiedCondition, status: 'False', reason: 'OwnershipNotVerified' }],
      observed: { ...observed, result: 'OwnershipNotVerified' },
      verifiedAt: minutesAgo(1),
      ownership: ownership(true),
    },
  },
  {
    name: 'a proof made with another key',
    required: false,
    status: proved({ conditions: [verifiedCondition], observed, verifiedAt: minutesAgo(1) }, OTHER_KEY),
  },
  {
    name: 'a proof copied from another CustomDomain (another uid)',
    required: false,
    status: proved(
      { conditions: [verifiedCondition], observed, verifiedAt: minutesAgo(1) },
      KEY,
      'uid-other',
    ),
  },
  {
    name: 'the operator’s proof of an unverified outcome, with the condition turned True',
    required: false,
    status: {
      ...proved({
        conditions: [{ ...verifiedCondition, status: 'False', reason: 'RecordNotFound' }],
        observed: { ...observed, result: 'RecordNotFound' },
      }),
      conditions: [verifiedCondition],
    },
  },
  {
    name: 'a genuine verified outcome, while the ownership record is asked for and not found',
    required: true,
    status: {
      ...proved({ conditions: [verifiedCondition], observed, verifiedAt: minutesAgo(1) }),
      ownership: ownership(true),
    },
  },
];

describe('DnsPhase with a status it did not write', () => {
  it.each(forged)(
    '$name: checked at once, not verified, no verifiedAt, no order',
    async ({ required, status }) => {
      // DNS answers NXDOMAIN: only a forged outcome could verify the domain.
      const dns = phase(required, { kind: 'nxdomain' });
      const trusted = await dns.trusted(domain(status));
      const due = dnsCheckDue(trusted, now);
      const outcome = await dns.verify(trusted, 'shop/www', due, now, log);
      expect(outcome.condition.status).toBe('False');
      expect(outcome.carried.verifiedAt).toBeUndefined();
      // The reconcile routes when verified or verifiedAt, and orders when verified.
      const decision = decideCertificate({
        verified: outcome.condition.status === 'True',
        verifyRequested: false,
        stored: { kind: 'none' },
        inFlight: undefined,
        failure: undefined,
        verifiedAt: trusted.status?.verifiedAt,
        lastVerifyRequest: undefined,
        overdueMs: 30 * 60_000,
        now,
      });
      expect(decision.action).not.toBe('order');
    },
  );

  it('forged DNSVerified=True on a dangling CNAME with the ownership record asked for: OwnershipNotVerified, no grace', async () => {
    const dns = phase(true);
    const trusted = await dns.trusted(domain(forged[0]?.status ?? {}));
    const outcome = await dns.verify(trusted, 'shop/www', dnsCheckDue(trusted, now), now, log);
    expect(outcome.condition).toMatchObject({ status: 'False', reason: 'OwnershipNotVerified' });
  });

  it('keeps the operator’s own verified outcome: carried as it is, with the same proof, no check', async () => {
    const dns = phase(false, { kind: 'nxdomain' });
    const status = proved({
      conditions: [verifiedCondition],
      observed,
      verifiedAt: minutesAgo(1),
      ownership: ownership(false),
    });
    const given = domain(status);
    const trusted = await dns.trusted(given);
    expect(trusted).toBe(given);
    expect(trusted.status?.verifiedAt).toBe(status.verifiedAt);
    const due = dnsCheckDue(trusted, now);
    expect(due).toBeUndefined();
    const outcome = await dns.verify(trusted, 'shop/www', due, now, log);
    expect(outcome.condition).toMatchObject({ status: 'True', reason: 'RecordMatches' });
    expect(outcome.carried.verifiedAt).toBe(status.verifiedAt);
  });

  it('a fresh outcome, signed as the reconcile writes it, is trusted at the next reconcile', async () => {
    const dns = phase(false);
    const first = await dns.verify(domain({ ownership: ownership(false) }), 'shop/www', 'first', now, log);
    expect(first.condition.status).toBe('True');
    const written = proved({
      ...first.carried,
      conditions: [
        { ...verifiedCondition, reason: first.condition.reason, message: first.condition.message },
      ],
    });
    expect(written.observed?.proof).toMatch(/^[\w-]{43}$/);
    const trusted = await dns.trusted(domain(written));
    expect(trusted.status?.verifiedAt).toBe(first.carried.verifiedAt);
    expect(dnsCheckDue(trusted, new Date(now.getTime() + 60_000))).toBeUndefined();
  });
});
