import { describe, expect, it } from 'vitest';
import type { CertificateStatus } from '../../../api/customdomain.js';
import type { DelegationVerdict } from '../../../dns/challenge-delegation.js';
import type { IssuanceFailure } from '../issuance-state.js';
import type { QueuedOrder } from '../status.js';
import {
  decideCertificate,
  dns01RecordName,
  mayOrder,
  orderMayStart,
  queuedRecheckMs,
  type CertificateDecision,
  type CertificateDecisionInput,
} from './certificate-decision.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(t0.getTime() + ms);
const MIN = 60_000;
const now = at(60 * MIN);

/** A certificate whose renewal time is `renewalAt`. */
const serving = (renewalAt: Date, certId?: string): CertificateStatus => ({
  secretName: 'www-tls',
  notBefore: t0.toISOString(),
  notAfter: at(90 * 24 * 60 * MIN).toISOString(),
  renewalTime: renewalAt.toISOString(),
  serialNumber: 'AB',
  issuer: 'CN=Pebble',
  dnsNames: ['www.example.com'],
  ...(certId
    ? {
        ari: {
          certId,
          windowStart: renewalAt.toISOString(),
          windowEnd: renewalAt.toISOString(),
          checkedAt: t0.toISOString(),
          nextCheckAt: at(6 * 60 * MIN).toISOString(),
        },
      }
    : {}),
});
const notDue = serving(at(120 * MIN));
const due = serving(at(30 * MIN), 'aki.serial');

const failure = (reason: string, nextAttemptTime: Date): IssuanceFailure => ({
  failedAttempts: 2,
  lastFailureTime: at(50 * MIN),
  reason,
  message: `the CA said ${reason}`,
  nextAttemptTime,
});
const caaLater = failure('CAAForbidsIssuance', at(70 * MIN));
const rateLimitedLater: IssuanceFailure = {
  ...failure('CARateLimited', at(65 * MIN)),
  retryAfter: at(65 * MIN),
};
const failedPast = failure('IssuanceFailed', at(55 * MIN));
const zoneRefusedPast = failure('ChallengeZoneRefused', at(55 * MIN));
const zoneRefusedLater = failure('ChallengeZoneRefused', at(70 * MIN));
const zoneUnreachablePast = failure('ChallengeZoneUnreachable', at(55 * MIN));

/** The DNS-01 delegation of www.example.com into the challenge zone, with the last check's verdict. */
const TARGET = '0123456789abcdef0123456789abcdef.challenges.platform.test';
const delegation = (verdict: DelegationVerdict | undefined): CertificateDecisionInput['delegation'] => ({
  name: '_acme-challenge.www.example.com',
  target: TARGET,
  verdict,
});
const delegatedIn = delegation({ kind: 'delegated' });
const elsewhere = delegation({ kind: 'pointsElsewhere', target: 'x.other-dns.test' });
const OWNERSHIP_RECORD = '_portico-challenge.www.example.com';
/** Delegated, but the ownership TXT record the platform asks for is not found yet. */
const delegatedOwnershipPending: CertificateDecisionInput['delegation'] = {
  name: '_acme-challenge.www.example.com',
  target: TARGET,
  verdict: { kind: 'delegated' },
  ownershipPending: OWNERSHIP_RECORD,
};

const base: CertificateDecisionInput = {
  verified: true,
  verifyRequested: false,
  stored: { kind: 'none' },
  inFlight: undefined,
  failure: undefined,
  // Verified 10 minutes ago: not overdue for a 30-minute threshold.
  verifiedAt: at(50 * MIN).toISOString(),
  lastVerifyRequest: undefined,
  overdueMs: 30 * MIN,
  now,
};

const turn: QueuedOrder = {
  kind: 'queued',
  limit: 'AccountOrderBudget',
  message: 'Waiting for the account order budget: place 3.',
  position: 3,
  expectedAt: at(62 * MIN),
};

/** The decision in a form a table can state: action, state kind, renewal kind, requeue, order fields. */
function summary(d: CertificateDecision): Record<string, unknown> {
  switch (d.action) {
    case 'report':
    case 'withdraw': {
      const { state, requeueAfterMs } = d.outcome;
      return {
        action: d.action,
        state: state.kind,
        ...(state.kind === 'valid' && state.renewal ? { renewal: state.renewal.kind } : {}),
        ...(state.kind === 'issuing' && state.replacing ? { replacing: true } : {}),
        ...(state.kind === 'failed' ? { reason: state.reason } : {}),
        ...(state.kind === 'not-requested' && state.delegationElsewhere
          ? { delegationElsewhere: state.delegationElsewhere.found }
          : {}),
        ...(state.kind === 'not-requested' && state.awaitingOwnership !== undefined
          ? { awaitingOwnership: state.awaitingOwnership }
          : {}),
        ...(state.kind === 'valid' && state.renewal?.kind === 'failed'
          ? { reason: state.renewal.reason }
          : {}),
        ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}),
      };
    }
    case 'abandon':
      return { action: 'abandon' };
    case 'order':
      return {
        action: 'order',
        kind: d.kind,
        priorFailures: d.priorFailures,
        ...(d.replaces ? { replaces: d.replaces } : {}),
        ...(d.unusable ? { unusable: true } : {}),
        ...(d.dns01RecordName ? { dns01: d.dns01RecordName } : {}),
        orderStarted: d.started.orderStarted ?? false,
      };
  }
}

type Row = [string, Partial<CertificateDecisionInput>, Record<string, unknown>];

const rows: Row[] = [
  // First issuance (docs/customdomains.md, "Certificates").
  [
    'not verified, nothing stored: not requested, leaves the line',
    { verified: false },
    { action: 'withdraw', state: 'not-requested' },
  ],
  [
    'not verified, an order in flight: not requested, keeps its slot',
    { verified: false, inFlight: { startedAt: at(55 * MIN) } },
    { action: 'report', state: 'not-requested' },
  ],
  [
    'verified, nothing stored: order a first certificate',
    {},
    { action: 'order', kind: 'first-issuance', priorFailures: 0, orderStarted: true },
  ],
  [
    'verified, order in flight: issuing since it started',
    { inFlight: { startedAt: at(55 * MIN) } },
    { action: 'report', state: 'issuing' },
  ],
  [
    'verified, an unusable Secret: replaced at once (the order is not held back for status)',
    { stored: { kind: 'unusable', problem: 'Secret www-tls holds a certificate that expired at …' } },
    { action: 'order', kind: 'first-issuance', priorFailures: 0, unusable: true, orderStarted: false },
  ],
  [
    'an unusable Secret with its replacement in flight: Reissuing',
    { stored: { kind: 'unusable', problem: 'Secret www-tls …' }, inFlight: { startedAt: at(55 * MIN) } },
    { action: 'report', state: 'issuing', replacing: true },
  ],
  // Failures: the published backoff and the CA's Retry-After (RFC 8555 §6.6).
  [
    'CAA forbids issuance, next attempt ahead: failed until then',
    { failure: caaLater },
    { action: 'report', state: 'failed', reason: 'CAAForbidsIssuance', requeueAfterMs: 10 * MIN },
  ],
  [
    'rate-limited with Retry-After ahead: failed until then',
    { failure: rateLimitedLater },
    { action: 'report', state: 'failed', reason: 'CARateLimited', requeueAfterMs: 5 * MIN },
  ],
  [
    'a failure whose next attempt has come: order again, counting the failures',
    { failure: failedPast },
    { action: 'order', kind: 'first-issuance', priorFailures: 2, orderStarted: true },
  ],
  // Renewal (RFC 9773 or two thirds of the lifetime).
  [
    'a certificate not yet due: kept, looked at again at its renewal time',
    { stored: { kind: 'usable', certificate: notDue } },
    { action: 'report', state: 'valid', requeueAfterMs: 60 * MIN },
  ],
  [
    'due and verified: renew, replacing its ARI identifier',
    { stored: { kind: 'usable', certificate: due } },
    { action: 'order', kind: 'renewal', priorFailures: 0, replaces: 'aki.serial', orderStarted: true },
  ],
  [
    'due, not verified: awaits verification, no timed re-check',
    { verified: false, stored: { kind: 'usable', certificate: due } },
    { action: 'report', state: 'valid', renewal: 'awaiting-verification' },
  ],
  [
    'due with the renewal in flight: renewing',
    { stored: { kind: 'usable', certificate: due }, inFlight: { startedAt: at(58 * MIN) } },
    { action: 'report', state: 'valid', renewal: 'in-progress' },
  ],
  [
    'due after a failed renewal: RenewalFailed until the next attempt',
    { stored: { kind: 'usable', certificate: due }, failure: caaLater },
    {
      action: 'report',
      state: 'valid',
      renewal: 'failed',
      reason: 'CAAForbidsIssuance',
      requeueAfterMs: 10 * MIN,
    },
  ],
  [
    'not due with a failure recorded: the certificate serves, nothing waits',
    { stored: { kind: 'usable', certificate: notDue }, failure: caaLater },
    { action: 'report', state: 'valid', requeueAfterMs: 60 * MIN },
  ],
  // Re-verify and overdue (overdue.ts).
  [
    're-verify past the overdue threshold, order stuck since before it: abandon',
    {
      verifyRequested: true,
      verifiedAt: at(0).toISOString(),
      inFlight: { startedAt: at(10 * MIN) },
    },
    { action: 'abandon' },
  ],
  [
    're-verify past the threshold, but the tracker refused to abandon: issuing',
    {
      verifyRequested: true,
      verifiedAt: at(0).toISOString(),
      inFlight: { startedAt: at(10 * MIN) },
      abandonRefused: true,
    },
    { action: 'report', state: 'issuing' },
  ],
  [
    're-verify before the threshold: the order in flight continues',
    { verifyRequested: true, inFlight: { startedAt: at(55 * MIN) } },
    { action: 'report', state: 'issuing' },
  ],
  [
    'overdue without a verify request: the order in flight continues',
    { verifiedAt: at(0).toISOString(), inFlight: { startedAt: at(10 * MIN) } },
    { action: 'report', state: 'issuing' },
  ],
  [
    're-verify with a certificate serving: never abandons (renewal rules)',
    {
      verifyRequested: true,
      verifiedAt: at(0).toISOString(),
      stored: { kind: 'usable', certificate: due },
      inFlight: { startedAt: at(10 * MIN) },
    },
    { action: 'report', state: 'valid', renewal: 'in-progress' },
  ],
  // DNS-01 by delegation (docs/customdomains.md, "Certificates before the move").
  [
    'not verified but delegated: order a first certificate by DNS-01',
    { verified: false, delegation: delegatedIn },
    { action: 'order', kind: 'first-issuance', priorFailures: 0, dns01: TARGET, orderStarted: true },
  ],
  [
    'not verified, delegated, ownership record asked for and not found: not requested, the state names the record',
    { verified: false, delegation: delegatedOwnershipPending },
    { action: 'withdraw', state: 'not-requested', awaitingOwnership: OWNERSHIP_RECORD },
  ],
  [
    'not verified, delegated, ownership pending, a certificate due: no DNS-01 renewal before the record',
    { verified: false, delegation: delegatedOwnershipPending, stored: { kind: 'usable', certificate: due } },
    { action: 'report', state: 'valid', renewal: 'awaiting-verification' },
  ],
  [
    'verified and delegated: DNS-01 too',
    { delegation: delegatedIn },
    { action: 'order', kind: 'first-issuance', priorFailures: 0, dns01: TARGET, orderStarted: true },
  ],
  [
    'verified, delegation absent: HTTP-01 as without a challenge zone',
    { delegation: delegation({ kind: 'absent' }) },
    { action: 'order', kind: 'first-issuance', priorFailures: 0, orderStarted: true },
  ],
  [
    'verified, delegation points elsewhere: HTTP-01',
    { delegation: elsewhere },
    { action: 'order', kind: 'first-issuance', priorFailures: 0, orderStarted: true },
  ],
  [
    'not verified, delegation points elsewhere: not requested, the state names the CNAME found',
    { verified: false, delegation: elsewhere },
    { action: 'withdraw', state: 'not-requested', delegationElsewhere: 'x.other-dns.test' },
  ],
  [
    'not verified, delegation absent or not yet checked: not requested',
    { verified: false, delegation: delegation(undefined) },
    { action: 'withdraw', state: 'not-requested' },
  ],
  [
    'not verified, delegation unknown (lookup failed, nothing recorded): not requested',
    { verified: false, delegation: delegation({ kind: 'unknown', answer: 'servfail' }) },
    { action: 'withdraw', state: 'not-requested' },
  ],
  [
    'delegated, not verified, the zone refused and its backoff is ahead: failed with its reason',
    { verified: false, delegation: delegatedIn, failure: zoneRefusedLater },
    { action: 'report', state: 'failed', reason: 'ChallengeZoneRefused', requeueAfterMs: 10 * MIN },
  ],
  [
    'delegated, not verified, the zone refused, backoff over: DNS-01 again (HTTP-01 cannot work)',
    { verified: false, delegation: delegatedIn, failure: zoneRefusedPast },
    { action: 'order', kind: 'first-issuance', priorFailures: 2, dns01: TARGET, orderStarted: true },
  ],
  [
    'delegated and verified, the zone refused, backoff over: HTTP-01 this time',
    { delegation: delegatedIn, failure: zoneRefusedPast },
    { action: 'order', kind: 'first-issuance', priorFailures: 2, orderStarted: true },
  ],
  [
    'delegated and verified, the zone unreachable, backoff over: HTTP-01 this time',
    { delegation: delegatedIn, failure: zoneUnreachablePast },
    { action: 'order', kind: 'first-issuance', priorFailures: 2, orderStarted: true },
  ],
  [
    'delegated and verified, another failure, backoff over: DNS-01 again',
    { delegation: delegatedIn, failure: failedPast },
    { action: 'order', kind: 'first-issuance', priorFailures: 2, dns01: TARGET, orderStarted: true },
  ],
  [
    'due, not verified but delegated: renew by DNS-01',
    { verified: false, delegation: delegatedIn, stored: { kind: 'usable', certificate: due } },
    {
      action: 'order',
      kind: 'renewal',
      priorFailures: 0,
      replaces: 'aki.serial',
      dns01: TARGET,
      orderStarted: true,
    },
  ],
  [
    'due, verified and delegated: renew by DNS-01',
    { delegation: delegatedIn, stored: { kind: 'usable', certificate: due } },
    {
      action: 'order',
      kind: 'renewal',
      priorFailures: 0,
      replaces: 'aki.serial',
      dns01: TARGET,
      orderStarted: true,
    },
  ],
  [
    'due, not verified, delegation points elsewhere: awaits verification',
    { verified: false, delegation: elsewhere, stored: { kind: 'usable', certificate: due } },
    { action: 'report', state: 'valid', renewal: 'awaiting-verification' },
  ],
];

describe('decideCertificate', () => {
  it.each(rows)('%s', (_name, input, expected) => {
    expect(summary(decideCertificate({ ...base, ...input }))).toEqual(expected);
  });

  it('an order told to wait reports its place in line and looks again at its expected time (queue)', () => {
    const first = decideCertificate(base);
    if (first.action !== 'order') throw new Error(`expected an order, got ${first.action}`);
    expect(first.queued(turn)).toEqual({ state: turn, requeueAfterMs: 2 * MIN });
    const renewal = decideCertificate({ ...base, stored: { kind: 'usable', certificate: due } });
    if (renewal.action !== 'order') throw new Error(`expected an order, got ${renewal.action}`);
    expect(renewal.queued(turn)).toEqual({
      state: { kind: 'valid', certificate: due, renewal: turn },
      requeueAfterMs: 2 * MIN,
    });
  });

  it('an order that starts reports issuing (or renewing) since now', () => {
    const first = decideCertificate(base);
    if (first.action !== 'order') throw new Error(`expected an order, got ${first.action}`);
    expect(first.started.state).toEqual({ kind: 'issuing', since: now });
    const renewal = decideCertificate({ ...base, stored: { kind: 'usable', certificate: due } });
    if (renewal.action !== 'order') throw new Error(`expected an order, got ${renewal.action}`);
    expect(renewal.started.state).toEqual({
      kind: 'valid',
      certificate: due,
      renewal: { kind: 'in-progress', since: now },
    });
  });
});

describe('orderMayStart', () => {
  it('holds for a verified domain with no order in flight and no attempt ahead', () => {
    expect(orderMayStart(true, undefined, undefined, now)).toBe(true);
    expect(orderMayStart(true, undefined, failedPast, now)).toBe(true);
    expect(orderMayStart(false, undefined, undefined, now)).toBe(false);
    expect(orderMayStart(true, { startedAt: now }, undefined, now)).toBe(false);
    expect(orderMayStart(true, undefined, caaLater, now)).toBe(false);
  });
});

describe('mayOrder and dns01RecordName', () => {
  it('may order when verified or delegated, and names the TXT record only when delegated', () => {
    expect(mayOrder({ verified: false, delegation: delegatedIn })).toBe(true);
    expect(mayOrder({ verified: false, delegation: elsewhere })).toBe(false);
    expect(mayOrder({ verified: false, delegation: delegatedOwnershipPending })).toBe(false);
    expect(mayOrder({ verified: false })).toBe(false);
    expect(mayOrder({ verified: true })).toBe(true);
    expect(dns01RecordName({ verified: true, delegation: delegatedIn, failure: undefined })).toBe(TARGET);
    expect(dns01RecordName({ verified: true, delegation: elsewhere, failure: undefined })).toBeUndefined();
    expect(dns01RecordName({ verified: true, failure: undefined })).toBeUndefined();
  });
});

describe('queuedRecheckMs', () => {
  it('is the time to the expected turn, at least a second', () => {
    expect(queuedRecheckMs({ expectedAt: at(61 * MIN) }, now)).toBe(MIN);
    expect(queuedRecheckMs({ expectedAt: at(59 * MIN) }, now)).toBe(1_000);
  });
});
