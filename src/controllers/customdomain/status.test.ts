import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../api/customdomain.js';
import { changedConditions } from '../../kube/conditions.js';
import {
  asSentence,
  buildStatus,
  CERTIFICATE_THRESHOLD_MS,
  NOT_OBSERVED_SENTENCE,
  UNCONFIRMED_SENTENCE,
  type ObservedState,
} from './status.js';
import { dnsCheckDue, issuanceRetryDelayMs, nextDnsCheckDelayMs } from './schedule.js';
import { msUntilOverdue, overdueClockStart } from './overdue.js';

const domain: CustomDomain = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'CustomDomain',
  metadata: { name: 'www', namespace: 'shop', generation: 2 },
  spec: { hostname: 'www.example.com', service: { name: 'web' } },
};
const t0 = new Date('2026-01-01T00:00:00Z');
/** `observed` with the CertificateOverdue clock a reconcile computes for a domain verified at `verifiedAt`. */
const clocked = (observed: ObservedState, verifiedAt: string, now = t0): ObservedState => ({
  ...observed,
  overdueClock: overdueClockStart(verifiedAt, undefined, now),
});
const verified = { type: 'DNSVerified', status: 'True', reason: 'RecordMatches', message: 'ok' } as const;
const accepted = { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ok' } as const;
const certificate = {
  secretName: 'www-tls',
  notBefore: '2026-01-01T00:00:00.000Z',
  notAfter: '2026-04-01T00:00:00.000Z',
  renewalTime: '2026-03-01T00:00:00.000Z',
  serialNumber: 'AB',
  issuer: 'CN=Pebble',
  dnsNames: ['www.example.com'],
};

describe('buildStatus', () => {
  it('is Live and Ready when DNS, certificate and routing are all good', () => {
    const observed: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: { kind: 'valid', certificate },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    const status = buildStatus(domain, observed, {}, t0);
    expect(status.phase).toBe('Live');
    expect(status.observedGeneration).toBe(2);
    expect(status.certificate).toEqual(certificate);
    expect(status.conditions?.map((c) => [c.type, c.status])).toEqual([
      ['Accepted', 'True'],
      ['DNSVerified', 'True'],
      ['CertificateReady', 'True'],
      ['Routed', 'True'],
      ['Ready', 'True'],
    ]);
    expect(status.conditions?.every((c) => c.observedGeneration === 2)).toBe(true);
  });

  it('says serving is confirmed only when the data plane confirmed it; unconfirmed routing still counts as written', () => {
    const base: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: { kind: 'valid', certificate },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    const condition = (observed: ObservedState, type: string) =>
      buildStatus(domain, observed, {}, t0).conditions?.find((c) => c.type === type);
    expect(condition(base, 'Ready')?.message).toBe(
      `www.example.com has certificate ${certificate.serialNumber}, and the data plane acknowledged its route. ${NOT_OBSERVED_SENTENCE}`,
    );
    expect(condition(base, 'Routed')?.message).toBe('Ingress portico-www routes the hostname.');

    const acknowledged: ObservedState = {
      ...base,
      routing: {
        kind: 'routed',
        message:
          'HTTPProxy portico-www routes the hostname. Contour took HTTPProxy portico-www (currentStatus valid).',
        confirmed: true,
        acknowledgement: 'Contour took HTTPProxy portico-www (currentStatus valid).',
      },
    };
    expect(condition(acknowledged, 'Ready')).toMatchObject({ status: 'True', reason: 'Live' });
    expect(condition(acknowledged, 'Ready')?.message).toBe(
      `www.example.com has certificate ${certificate.serialNumber}, and its route is acknowledged: Contour took HTTPProxy portico-www (currentStatus valid). ` +
        'Serving was not observed: no HTTPS request is made while the serving check is off (--serving-check-address, chart value routing.servingCheck.address).',
    );
    expect(condition(acknowledged, 'Ready')?.message).not.toContain('serves over HTTPS');

    const unconfirmed: ObservedState = {
      ...base,
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: false },
    };
    expect(buildStatus(domain, unconfirmed, {}, t0).phase).toBe('Live');
    expect(condition(unconfirmed, 'Routed')).toMatchObject({ status: 'True', reason: 'RoutesReady' });
    expect(condition(unconfirmed, 'Routed')?.message).toBe(
      `Ingress portico-www routes the hostname. ${UNCONFIRMED_SENTENCE}`,
    );
    expect(condition(unconfirmed, 'Ready')?.message).toBe(
      `www.example.com has certificate ${certificate.serialNumber} and its routing is written, but unconfirmed: the data-plane acknowledgement is off, so the ingress controller or gateway is not asked. ${NOT_OBSERVED_SENTENCE}`,
    );
    expect(condition(unconfirmed, 'Ready')?.message).not.toContain('serves over HTTPS');

    const refused: ObservedState = {
      ...base,
      routing: {
        kind: 'not-routed',
        reason: 'NotAllowedByListeners',
        message:
          'Gateway infra/public on HTTPRoute portico-www: Accepted=False (NotAllowedByListeners): no listener admits the route',
      },
    };
    expect(buildStatus(domain, refused, {}, t0).phase).toBe('Verified');
    expect(condition(refused, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'NotAllowedByListeners',
      message:
        'Routed: Gateway infra/public on HTTPRoute portico-www: Accepted=False (NotAllowedByListeners): no listener admits the route',
    });
  });

  it('says why an unusable Secret is being replaced, and never calls it overdue (docs/customdomains.md, "Conditions and reasons")', () => {
    const observed: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: {
        kind: 'issuing',
        since: t0,
        replacing: "Secret www-tls holds a tls.key that is not the certificate's private key",
      },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    // Verified two months ago: far past the 30-minute threshold for a first certificate.
    const verifiedAt = '2025-11-01T00:00:00Z';
    const status = buildStatus(domain, clocked(observed, verifiedAt), { verifiedAt }, t0);
    expect(status.conditions?.find((c) => c.type === 'CertificateReady')).toMatchObject({
      status: 'False',
      reason: 'Reissuing',
      message:
        "Secret www-tls holds a tls.key that is not the certificate's private key, so it cannot serve; a new certificate is being issued (an ACME order in progress since 2026-01-01T00:00:00.000Z).",
    });
    expect(status.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'Reissuing',
    });
    expect(status.phase).toBe('Issuing');
  });

  it('says why a due renewal waits when DNS no longer verifies (docs/customdomains.md, "Conditions and reasons")', () => {
    const observed: ObservedState = {
      accepted,
      dnsVerified: { type: 'DNSVerified', status: 'False', reason: 'CNAMEMismatch', message: 'elsewhere' },
      certificate: { kind: 'valid', certificate, renewal: { kind: 'awaiting-verification' } },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    const c = buildStatus(domain, observed, {}, t0).conditions?.find((x) => x.type === 'CertificateReady');
    expect(c).toMatchObject({ status: 'True', reason: 'RenewalAwaitsVerification' });
    expect(c?.message).toContain(
      'its renewal was due at 2026-03-01T00:00:00.000Z and is ordered once DNS verifies again',
    );
  });

  it('stays Live while a renewal is under way or has failed, and says which', () => {
    const routing = {
      kind: 'routed',
      message: 'Ingress portico-www routes the hostname.',
      confirmed: true,
    } as const;
    const condition = (observed: ObservedState): unknown =>
      buildStatus(domain, observed, {}, t0).conditions?.find((c) => c.type === 'CertificateReady');
    const since = new Date('2026-03-01T00:00:05Z');
    const renewing: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: { kind: 'valid', certificate, renewal: { kind: 'in-progress', since } },
      routing,
    };
    expect(buildStatus(domain, renewing, {}, t0).phase).toBe('Live');
    expect(condition(renewing)).toMatchObject({
      status: 'True',
      reason: 'Renewing',
      message:
        'Certificate AB from CN=Pebble is valid until 2026-04-01T00:00:00.000Z and serves while its renewal, an ACME order in progress since 2026-03-01T00:00:05.000Z, completes.',
    });
    const retryAt = new Date('2026-03-01T00:01:05Z');
    const failed: ObservedState = {
      ...renewing,
      certificate: {
        kind: 'valid',
        certificate,
        renewal: {
          kind: 'failed',
          reason: 'CAAForbidsIssuance',
          message: 'CAA example.com 0 issue "digicert.com"',
          retryAt,
        },
      },
    };
    const status = buildStatus(domain, failed, {}, t0);
    expect(status.phase).toBe('Live');
    expect(status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(condition(failed)).toMatchObject({
      status: 'True',
      reason: 'RenewalFailed',
      message:
        'Certificate AB from CN=Pebble is valid until 2026-04-01T00:00:00.000Z and still serves, but its renewal failed (CAAForbidsIssuance): CAA example.com 0 issue "digicert.com". Next attempt at 2026-03-01T00:01:05.000Z.',
    });
  });

  it('says on CertificateReady that the DNS-01 delegation points elsewhere, naming both names', () => {
    const observed: ObservedState = {
      accepted,
      dnsVerified: { type: 'DNSVerified', status: 'False', reason: 'CNAMEMismatch', message: 'elsewhere' },
      certificate: {
        kind: 'not-requested',
        delegationElsewhere: {
          name: '_acme-challenge.www.example.com',
          found: 'x.other-dns.net',
          wanted: 'abc.challenges.platform.net',
        },
      },
      routing: { kind: 'not-routed', reason: 'AwaitingDNSVerification', message: 'later' },
    };
    const condition = buildStatus(domain, observed, {}, t0).conditions?.find(
      (c) => c.type === 'CertificateReady',
    );
    expect(condition).toMatchObject({ status: 'False', reason: 'ChallengeDelegationMismatch' });
    expect(condition?.message).toBe(
      '_acme-challenge.www.example.com is a CNAME to x.other-dns.net, not to abc.challenges.platform.net: the certificate is not issued before DNS verification. Point it at abc.challenges.platform.net to have it issued now, or wait for DNS verification (HTTP-01).',
    );
  });

  it('a delegated challenge while the ownership record is missing: awaits it, and names the record', () => {
    const observed: ObservedState = {
      accepted,
      dnsVerified: { type: 'DNSVerified', status: 'False', reason: 'CNAMEMismatch', message: 'elsewhere' },
      certificate: { kind: 'not-requested', awaitingOwnership: '_portico-challenge.www.example.com' },
      routing: { kind: 'not-routed', reason: 'AwaitingDNSVerification', message: 'later' },
    };
    const condition = buildStatus(domain, observed, {}, t0).conditions?.find(
      (c) => c.type === 'CertificateReady',
    );
    expect(condition).toMatchObject({ status: 'False', reason: 'AwaitingDNSVerification' });
    expect(condition?.message).toBe(
      'The ACME challenge is delegated, but the platform asks this domain to show ownership first: the certificate is ordered by DNS-01 once the TXT record _portico-challenge.www.example.com is found (status.dnsRecords).',
    );
  });

  it('says why it is not Ready, and keeps transition times that did not flip', () => {
    const awaiting: ObservedState = {
      accepted,
      dnsVerified: { type: 'DNSVerified', status: 'False', reason: 'ConflictingRecord', message: 'A found' },
      certificate: { kind: 'not-requested' },
      routing: { kind: 'not-routed', reason: 'AwaitingDNSVerification', message: 'later' },
    };
    const first = buildStatus(domain, awaiting, {}, t0);
    expect(first.phase).toBe('AwaitingDNS');
    const ready = first.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'ConflictingRecord' });
    expect(ready?.message).toContain('DNSVerified: A found');
    const later = new Date(t0.getTime() + 60_000);
    const second = buildStatus({ ...domain, status: first }, awaiting, {}, later);
    expect(second.conditions?.[1]?.lastTransitionTime).toBe(t0.toISOString());
    expect(changedConditions(first.conditions, second.conditions ?? [])).toEqual([]);
    const issuing = buildStatus(
      { ...domain, status: second },
      { ...awaiting, dnsVerified: verified, certificate: { kind: 'issuing', since: later } },
      {},
      later,
    );
    expect(issuing.phase).toBe('Issuing');
    expect(issuing.conditions?.[1]?.lastTransitionTime).toBe(later.toISOString());
    expect(changedConditions(second.conditions, issuing.conditions ?? []).map((c) => c.type)).toContain(
      'DNSVerified',
    );
  });

  it('is Pending while not accepted, with the gate as the Ready reason', () => {
    const status = buildStatus(
      domain,
      {
        accepted: { type: 'Accepted', status: 'False', reason: 'PlanNotEligible', message: 'upgrade' },
        dnsVerified: {
          type: 'DNSVerified',
          status: 'Unknown',
          reason: 'NotAccepted',
          message: 'not checked',
        },
        certificate: { kind: 'not-requested' },
        routing: { kind: 'not-routed', reason: 'NotAccepted', message: 'not routed' },
      },
      {},
      t0,
    );
    expect(status.phase).toBe('Pending');
    expect(status.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('PlanNotEligible');
  });

  it('gives a missing certificate its own reason 30 minutes after verification', () => {
    const verifiedAt = new Date(t0.getTime() - 31 * 60_000).toISOString();
    const observed: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: { kind: 'issuing', since: t0 },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    const late = buildStatus(domain, clocked(observed, verifiedAt), { verifiedAt }, t0).conditions?.find(
      (c) => c.type === 'CertificateReady',
    );
    expect(late?.reason).toBe('CertificateOverdue');
    expect(late?.message).toContain('31 minutes');
    expect(late?.message).toContain('CAA');
    expect(late?.message).toContain('portico.dev/verify-requested-at');
    const earlyAt = new Date(t0.getTime() - 29 * 60_000).toISOString();
    const early = buildStatus(domain, clocked(observed, earlyAt), { verifiedAt: earlyAt }, t0);
    expect(early.conditions?.find((c) => c.type === 'CertificateReady')?.reason).toBe('Issuing');
    const caa = buildStatus(
      domain,
      clocked(
        {
          ...observed,
          certificate: { kind: 'failed', reason: 'CAAForbidsIssuance', message: 'CAA x', retryAt: t0 },
        },
        verifiedAt,
      ),
      { verifiedAt },
      t0,
    );
    const caaLate = caa.conditions?.find((c) => c.type === 'CertificateReady');
    expect(caaLate?.reason).toBe('CertificateOverdue');
    expect(caaLate?.message).toContain('The last attempt failed (CAAForbidsIssuance): CAA x.');
    const caaEarly = buildStatus(
      domain,
      clocked(
        {
          ...observed,
          certificate: { kind: 'failed', reason: 'CAAForbidsIssuance', message: 'CAA x', retryAt: t0 },
        },
        earlyAt,
      ),
      { verifiedAt: earlyAt },
      t0,
    );
    expect(caaEarly.conditions?.find((c) => c.type === 'CertificateReady')?.reason).toBe(
      'CAAForbidsIssuance',
    );
  });

  it('is overdue also while the order waits for the CA budget, keeping the wait in the message (docs/customdomains.md, "Issuance state")', () => {
    const queued: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: {
        kind: 'queued',
        limit: 'AccountOrderBudget',
        message: 'Waiting for the account order budget: 3rd in line, expected at 2026-01-01T01:00:00.000Z',
        position: 3,
        expectedAt: new Date(t0.getTime() + 3_600_000),
      },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    const at = (minutes: number) => {
      const verifiedAt = new Date(t0.getTime() - minutes * 60_000).toISOString();
      return buildStatus(domain, clocked(queued, verifiedAt), { verifiedAt }, t0).conditions?.find(
        (c) => c.type === 'CertificateReady',
      );
    };
    expect(at(29)?.reason).toBe('OrderQueued');
    expect(at(30)?.reason).toBe('CertificateOverdue');
    expect(at(30)?.message).toContain(
      'The order is waiting (OrderQueued): Waiting for the account order budget: 3rd in line, expected at 2026-01-01T01:00:00.000Z.',
    );
  });

  it('counts overdue from the clock the reconcile passes, the one it also wakes by (msUntilOverdue)', () => {
    const observed: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: { kind: 'issuing', since: t0 },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    // Verified an hour ago, re-verify requested 10 minutes ago: the clock restarted then.
    const verifiedAt = new Date(t0.getTime() - 60 * 60_000).toISOString();
    const lastVerifyRequest = new Date(t0.getTime() - 10 * 60_000).toISOString();
    const clock = overdueClockStart(verifiedAt, lastVerifyRequest, t0);
    const overdueMs = CERTIFICATE_THRESHOLD_MS;
    const wakeMs = msUntilOverdue(clock, false, overdueMs, t0);
    expect(wakeMs).toBe(20 * 60_000);
    const reasonAt = (now: Date): string | undefined =>
      buildStatus(
        domain,
        { ...observed, overdueClock: clock },
        { verifiedAt, lastVerifyRequest },
        now,
        overdueMs,
      ).conditions?.find((c) => c.type === 'CertificateReady')?.reason;
    // Not overdue until the wake-up; overdue at it, though verifiedAt alone is long past.
    expect(reasonAt(new Date(t0.getTime() + (wakeMs ?? 0) - 1))).toBe('Issuing');
    expect(reasonAt(new Date(t0.getTime() + (wakeMs ?? 0)))).toBe('CertificateOverdue');
    const overdue = buildStatus(
      domain,
      { ...observed, overdueClock: clock },
      { verifiedAt, lastVerifyRequest },
      new Date(t0.getTime() + 25 * 60_000),
      overdueMs,
    ).conditions?.find((c) => c.type === 'CertificateReady');
    expect(overdue?.reason).toBe('CertificateOverdue');
    expect(overdue?.message).toContain('after the last verify request');
    // The status does not compute a clock of its own: without the reconcile's, nothing is overdue.
    expect(reasonAt(new Date(t0.getTime() + 24 * 60 * 60_000))).toBe('CertificateOverdue');
    expect(
      buildStatus(domain, observed, { verifiedAt, lastVerifyRequest }, t0, overdueMs).conditions?.find(
        (c) => c.type === 'CertificateReady',
      )?.reason,
    ).toBe('Issuing');
  });

  it('takes 30 minutes (1,800 s) as the threshold when none is given', () => {
    expect(CERTIFICATE_THRESHOLD_MS).toBe(1_800_000);
  });

  it('shows a failed order as Failed with the retry time', () => {
    const retryAt = new Date(t0.getTime() + 60_000);
    const status = buildStatus(
      domain,
      {
        accepted,
        dnsVerified: verified,
        certificate: { kind: 'failed', reason: 'IssuanceFailed', message: 'connection refused', retryAt },
        routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
      },
      {},
      t0,
    );
    expect(status.phase).toBe('Failed');
    const cert = status.conditions?.find((c) => c.type === 'CertificateReady');
    expect(cert?.reason).toBe('IssuanceFailed');
    expect(cert?.message).toContain(retryAt.toISOString());
  });

  it('writes status.issuance as carried, and removes one the domain had when none is carried', () => {
    const issuance = {
      failedAttempts: 1,
      lastFailureTime: '2026-01-01T00:00:00.000Z',
      lastFailureReason: 'IssuanceFailed',
      nextAttemptTime: '2026-01-01T00:01:00.000Z',
    };
    const observed: ObservedState = {
      accepted,
      dnsVerified: verified,
      certificate: {
        kind: 'failed',
        reason: 'IssuanceFailed',
        message: 'boom',
        retryAt: new Date(issuance.nextAttemptTime),
      },
      routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
    };
    expect(buildStatus(domain, observed, { issuance }, t0).issuance).toEqual(issuance);
    const failedBefore: CustomDomain = { ...domain, status: { issuance } };
    const live: ObservedState = { ...observed, certificate: { kind: 'valid', certificate } };
    expect(buildStatus(failedBefore, live, {}, t0).issuance).toBeUndefined();
  });
});

describe('schedules', () => {
  it('checks fast at first, then backs off to 10 minutes, and hourly once verified', () => {
    expect(nextDnsCheckDelayMs({ verified: false, transient: false }, 0)).toBe(5_000);
    expect(nextDnsCheckDelayMs({ verified: false, transient: false }, 10 * 60_000)).toBe(60_000);
    expect(nextDnsCheckDelayMs({ verified: false, transient: false }, 48 * 3600_000)).toBe(600_000);
    expect(nextDnsCheckDelayMs({ verified: false, transient: true }, 48 * 3600_000)).toBe(15_000);
    expect(nextDnsCheckDelayMs({ verified: true, transient: false }, 0)).toBe(3600_000);
  });

  it('retries failed orders after 1, 2, 4 minutes up to an hour', () => {
    expect([1, 2, 3, 10].map((n) => issuanceRetryDelayMs(n))).toEqual([60_000, 120_000, 240_000, 3600_000]);
  });

  it('starts the retries of failed orders at the first delay it is given, doubling up to an hour', () => {
    expect([1, 2, 3].map((n) => issuanceRetryDelayMs(n, 3_000))).toEqual([3_000, 6_000, 12_000]);
    expect(issuanceRetryDelayMs(30, 3_000)).toBe(3600_000);
  });

  it('runs a check first, on a spec change, on a new verify request, and when scheduled', () => {
    expect(dnsCheckDue(domain, t0)).toBe('first');
    const observed = {
      checkedAt: t0.toISOString(),
      nextCheckAt: new Date(t0.getTime() + 5_000).toISOString(),
      result: 'RecordNotFound',
      message: '',
      records: [],
    };
    const checked = { ...domain, status: { observedGeneration: 2, observed } };
    expect(dnsCheckDue(checked, t0)).toBeUndefined();
    expect(dnsCheckDue(checked, new Date(t0.getTime() + 5_000))).toBe('scheduled');
    expect(dnsCheckDue({ ...checked, metadata: { ...checked.metadata, generation: 3 } }, t0)).toBe(
      'spec-changed',
    );
    const requested = {
      ...checked,
      metadata: { ...checked.metadata, annotations: { 'portico.dev/verify-requested-at': 'now' } },
    };
    expect(dnsCheckDue(requested, t0)).toBe('requested');
    expect(
      dnsCheckDue({ ...requested, status: { ...checked.status, lastVerifyRequest: 'now' } }, t0),
    ).toBeUndefined();
  });
});

describe('asSentence', () => {
  it('ends a message with one full stop, never two', () => {
    expect(asSentence('CAA forbids "pebble.letsencrypt.org".')).toBe('CAA forbids "pebble.letsencrypt.org".');
    expect(asSentence('connection refused')).toBe('connection refused.');
    expect(asSentence('why? ')).toBe('why?');
  });
});

describe('buildStatus with foreign routes (docs/routing.md, "Foreign routes")', () => {
  const live: ObservedState = {
    accepted,
    dnsVerified: verified,
    certificate: { kind: 'valid', certificate },
    routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
  };

  it('adds no Conflicted condition while no foreign route was ever seen', () => {
    const status = buildStatus(domain, { ...live, foreignRoutes: [] }, {}, t0);
    expect(status.conditions?.some((c) => c.type === 'Conflicted')).toBe(false);
    expect(status.phase).toBe('Live');
  });

  it('sets Conflicted=True naming each object, and takes Ready down with reason ForeignRoute', () => {
    const status = buildStatus(domain, { ...live, foreignRoutes: ['Ingress other/hijack'] }, {}, t0);
    const conflicted = status.conditions?.find((c) => c.type === 'Conflicted');
    expect(conflicted).toMatchObject({ status: 'True', reason: 'ForeignRoute' });
    expect(conflicted?.message).toContain('Ingress other/hijack');
    const ready = status.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'ForeignRoute' });
    expect(ready?.message).toContain(
      'Conflicted: www.example.com is named by routes Portico does not own: Ingress other/hijack.',
    );
    expect(status.phase).toBe('Verified');

    // Cleared: False, NoForeignRoute, and Ready back to Live.
    const cleared = buildStatus({ ...domain, status }, { ...live, foreignRoutes: [] }, {}, t0);
    expect(cleared.conditions?.find((c) => c.type === 'Conflicted')).toMatchObject({
      status: 'False',
      reason: 'NoForeignRoute',
    });
    expect(cleared.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'Live',
    });
  });

  it('keeps another cause first in Ready', () => {
    const status = buildStatus(
      domain,
      {
        ...live,
        routing: { kind: 'not-routed', reason: 'NoBackend', message: 'x' },
        foreignRoutes: ['Ingress a/b'],
      },
      {},
      t0,
    );
    expect(status.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('NoBackend');
  });
});
