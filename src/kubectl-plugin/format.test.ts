import { describe, expect, it } from 'vitest';
import type { Condition, CustomDomain } from '../api/customdomain.js';
import { delegationRecord, requiredDnsRecords } from '../dns/records.js';
import {
  explain,
  formatExplanation,
  formatStatus,
  holdingCondition,
  humanDuration,
  nextCertificateAttempt,
  relativeTime,
  statusReport,
  type DomainEvent,
} from './format.js';

const now = new Date('2026-03-01T12:00:00Z');

function cond(
  type: string,
  status: Condition['status'],
  reason: string,
  message = `${type} says ${reason}`,
): Condition {
  return { type, status, reason, message, lastTransitionTime: '2026-03-01T11:55:00Z' };
}

const liveConditions = [
  cond('Ready', 'True', 'Live'),
  cond('Accepted', 'True', 'Accepted'),
  cond('DNSVerified', 'True', 'RecordMatches'),
  cond('CertificateReady', 'True', 'Issued'),
  cond('Routed', 'True', 'RoutesReady'),
];

function domain(
  conditions: Condition[],
  extra: Partial<NonNullable<CustomDomain['status']>> = {},
): CustomDomain {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name: 'www', namespace: 'shop', uid: 'u-1', generation: 2 },
    spec: { hostname: 'www.shop.example', service: { name: 'web' } },
    status: { phase: 'Live', observedGeneration: 2, conditions, ...extra },
  };
}

const live = domain(liveConditions, {
  dnsRecords: [{ type: 'CNAME', name: 'www.shop.example', value: 'sites.example.net', ttl: 3600 }],
  observed: {
    checkedAt: '2026-03-01T11:59:30Z',
    nextCheckAt: '2026-03-01T12:59:30Z',
    result: 'RecordMatches',
    message: 'CNAME www.shop.example -> sites.example.net matches',
    records: [{ type: 'CNAME', name: 'www.shop.example', value: 'sites.example.net' }],
  },
  certificate: {
    secretName: 'www-tls',
    notBefore: '2026-03-01T11:00:00Z',
    notAfter: '2026-05-30T11:00:00Z',
    renewalTime: '2026-04-30T11:00:00Z',
    serialNumber: '0a1b2c',
    issuer: 'CN=Pebble Intermediate CA',
    dnsNames: ['www.shop.example'],
  },
});

function event(minute: number, reason = `R${minute}`): DomainEvent {
  return {
    type: 'Normal',
    reason,
    message: `m${minute}`,
    count: 1,
    lastSeen: new Date(`2026-03-01T11:${String(minute).padStart(2, '0')}:00Z`),
  };
}

describe('durations', () => {
  it('reads like kubectl', () => {
    expect(humanDuration(45_000)).toBe('45s');
    expect(humanDuration(192_000)).toBe('3m12s');
    expect(humanDuration(45 * 60_000)).toBe('45m');
    expect(humanDuration((5 * 60 + 5) * 60_000)).toBe('5h5m');
    expect(humanDuration(3 * 86_400_000)).toBe('3d');
    expect(humanDuration(400 * 86_400_000)).toBe('400d');
    expect(relativeTime('2026-03-01T11:57:00Z', now)).toBe('3m ago');
    expect(relativeTime(new Date('2026-03-01T14:00:00Z'), now)).toBe('in 120m');
    expect(relativeTime(undefined, now)).toBe('-');
    expect(relativeTime('not a time', now)).toBe('-');
  });
});

describe('holdingCondition', () => {
  it('is the first condition, in the order a domain passes them, that is not True', () => {
    const held = domain([
      cond('Ready', 'False', 'CAAForbidsIssuance'),
      cond('Routed', 'False', 'AwaitingDNSVerification'),
      cond('CertificateReady', 'False', 'CAAForbidsIssuance'),
      cond('DNSVerified', 'True', 'RecordMatches'),
      cond('Accepted', 'True', 'Accepted'),
    ]);
    expect(holdingCondition(held)?.type).toBe('CertificateReady');
    expect(holdingCondition(live)).toBeUndefined();
  });

  it('names a condition the operator has not reported', () => {
    const fresh = domain([]);
    delete fresh.status;
    expect(holdingCondition(fresh)).toMatchObject({
      type: 'Accepted',
      status: 'Unknown',
      reason: 'NotReported',
    });
  });
});

describe('statusReport and formatStatus', () => {
  it('shows conditions in order, DNS wanted and found, the certificate and the next check', () => {
    const report = statusReport(live, [], now);
    expect(report.conditions.map((c) => c.type)).toEqual([
      'Accepted',
      'DNSVerified',
      'CertificateReady',
      'Routed',
      'Ready',
    ]);
    expect(report.conditions[0]?.age).toBe('5m');
    const text = formatStatus(report, now);
    expect(text).toContain('CustomDomain shop/www: www.shop.example');
    expect(text).toContain('Phase: Live (generation 2, observed 2)');
    expect(text).toMatch(/CertificateReady\s+True\s+Issued\s+5m/);
    expect(text).toContain('wanted:  CNAME www.shop.example -> sites.example.net  (TTL 3600)');
    expect(text).toContain('found:   CNAME www.shop.example -> sites.example.net');
    expect(text).toContain('verdict: RecordMatches, checked 30s ago');
    expect(text).toContain('next check: 2026-03-01T12:59:30Z (in 59m)');
    expect(text).toContain('secret:       www-tls');
    expect(text).toContain('serial:       0a1b2c');
    expect(text).toContain('issuer:       CN=Pebble Intermediate CA');
    expect(text).toContain('notAfter:     2026-05-30T11:00:00Z (in 89d)');
    expect(text).toContain('renewalTime:  2026-04-30T11:00:00Z (in 59d)');
    expect(text).toContain('next attempt: -');
    expect(text).toContain('Events: none');
  });

  it('shows the zone and the name as the DNS provider asks for it, and an apex ALIAS with its A/AAAA alternatives', () => {
    const dnsRecords = [
      ...requiredDnsRecords('www.shop.example.co.uk', 'sites.example.net'),
      ...requiredDnsRecords('example.co.uk', 'sites.example.net', ['192.0.2.10', '2001:db8::10']),
    ];
    const text = formatStatus(statusReport(domain(liveConditions, { dnsRecords }), [], now), now);
    expect(text).toContain(
      [
        '  wanted:  CNAME www.shop.example.co.uk -> sites.example.net  (TTL 3600)',
        '           at the DNS provider of example.co.uk: name www.shop',
        '  wanted:  ALIAS example.co.uk -> sites.example.net  (TTL 3600; An apex cannot hold a CNAME',
      ].join('\n'),
    );
    expect(text).toContain(
      [
        '           at the DNS provider of example.co.uk: name @',
        '           or instead, without ALIAS/ANAME: A @ -> 192.0.2.10, AAAA @ -> 2001:db8::10  (TTL 3600)',
      ].join('\n'),
    );
    // A record an older operator wrote (no zone, no relativeName) still shows on one line.
    expect(formatStatus(statusReport(live, [], now), now)).not.toContain('at the DNS provider of');
  });

  it('shows the DNS-01 delegation record as optional, with its name at the DNS provider', () => {
    const dnsRecords = [
      ...requiredDnsRecords('www.shop.example.co.uk', 'sites.example.net'),
      delegationRecord('www.shop.example.co.uk', 'abc.challenges.example.net'),
    ];
    const text = formatStatus(statusReport(domain(liveConditions, { dnsRecords }), [], now), now);
    expect(text).toContain(
      '  may add: CNAME _acme-challenge.www.shop.example.co.uk -> abc.challenges.example.net  (TTL 3600; Optional: ',
    );
    expect(text).toContain('           at the DNS provider of example.co.uk: name _acme-challenge.www.shop');
  });

  it('keeps the last 10 Events by time, newest last', () => {
    const events = [event(30), ...Array.from({ length: 12 }, (_, i) => event(i + 1))];
    const report = statusReport(live, events, now);
    expect(report.events.map((e) => e.reason)).toEqual([
      'R4',
      'R5',
      'R6',
      'R7',
      'R8',
      'R9',
      'R10',
      'R11',
      'R12',
      'R30',
    ]);
    const text = formatStatus(report, now);
    expect(text).toContain('Events (last 10, newest last):');
    expect(text.indexOf('R12')).toBeLessThan(text.indexOf('R30'));
    expect(text).not.toContain('R3 ');
  });

  it('orders Events of the same second by their sequence', () => {
    const second = new Date('2026-03-01T11:59:00Z');
    const events = [
      { ...event(1, 'Later'), lastSeen: second, sequence: 12 },
      { ...event(1, 'Earlier'), lastSeen: second, sequence: 11 },
    ];
    const report = statusReport(live, events, now);
    expect(report.events.map((e) => e.reason)).toEqual(['Earlier', 'Later']);
    expect(report.events[0]).not.toHaveProperty('sequence');
  });

  it('says what is not there yet rather than printing nothing', () => {
    const waiting = domain([
      cond('Accepted', 'True', 'Accepted'),
      cond('DNSVerified', 'False', 'RecordNotFound'),
    ]);
    const text = formatStatus(statusReport(waiting, [], now), now);
    expect(text).toContain('wanted:  (none listed yet)');
    expect(text).toContain('found:   not checked yet');
    expect(text).toContain('none issued yet');
  });

  it('takes the next certificate attempt from status.issuance, else from the message', () => {
    const failed = domain(
      [
        cond(
          'CertificateReady',
          'False',
          'IssuanceFailed',
          'The last attempt failed: boom. Next attempt at 2026-03-01T12:04:00.000Z.',
        ),
      ],
      {},
    );
    expect(nextCertificateAttempt(failed)?.toISOString()).toBe('2026-03-01T12:04:00.000Z');
    const queued = domain([
      cond(
        'CertificateReady',
        'False',
        'OrderQueued',
        'Queued for x: position 3, expected at 2026-03-01T13:00:00Z.',
      ),
    ]);
    expect(nextCertificateAttempt(queued)?.toISOString()).toBe('2026-03-01T13:00:00.000Z');

    const recorded = domain(failed.status?.conditions ?? [], {
      issuance: {
        failedAttempts: 3,
        lastFailureTime: '2026-03-01T11:58:00Z',
        lastFailureReason: 'CARateLimited',
        lastFailureMessage: 'too many orders',
        nextAttemptTime: '2026-03-01T12:30:00Z',
        retryAfter: '2026-03-01T12:30:00Z',
      },
    });
    expect(nextCertificateAttempt(recorded)?.toISOString()).toBe('2026-03-01T12:30:00.000Z');
    const text = formatStatus(statusReport(recorded, [], now), now);
    expect(text).toContain('failed attempts: 3, the last 2m ago (CARateLimited): too many orders');
    expect(text).toContain("CA's Retry-After: 2026-03-01T12:30:00Z (in 30m)");
    expect(text).toContain('next attempt: 2026-03-01T12:30:00.000Z (in 30m)');
  });
});

describe('explain', () => {
  it('names the holding condition, its reason, meaning and fix with the domain filled in', () => {
    const free = domain([
      cond(
        'Accepted',
        'False',
        'PlanNotEligible',
        'Custom domains need the Pro plan or above; shop is on the free plan.',
      ),
      cond('Ready', 'False', 'PlanNotEligible'),
    ]);
    const e = explain(free);
    expect(e.holding?.type).toBe('Accepted');
    expect(e.entry?.severity).toBe('Warning');
    const text = formatExplanation(e);
    expect(text).toContain('Held back by: Accepted=False, reason PlanNotEligible (Warning)');
    expect(text).toContain('Message:      Custom domains need the Pro plan or above');
    expect(text).toContain(
      'Meaning:      custom domains need Pro or above (docs/customdomains.md, "Conditions and reasons")',
    );
    expect(text).toContain('kubectl get namespace shop --show-labels');
    expect(text).not.toContain('<namespace>');
  });

  it('says a Live domain is Live', () => {
    expect(formatExplanation(explain(live))).toContain('Ready: every condition is True; the domain is Live.');
  });

  it('still answers for a reason the catalogue lacks, and for a domain never reconciled', () => {
    const odd = explain(domain([cond('Accepted', 'False', 'SomethingNew')]));
    expect(odd.entry).toBeUndefined();
    expect(formatExplanation(odd)).toContain('not in the reason catalogue');
    const fresh = domain([]);
    expect(explain(fresh).fix).toContain('operator runs');
  });
});
