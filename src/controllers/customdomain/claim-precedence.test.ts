import { describe, expect, it } from 'vitest';
import { FINALIZER, type CustomDomain } from '../../api/customdomain.js';
import type { HostnameClaim } from '../../api/hostnameclaim.js';
import {
  claimVerdict,
  firstServing,
  holdLapsed,
  holdLapsesAt,
  isAccepted,
  servesHostname,
  unhonouredReason,
  type ClaimFacts,
} from './claim-precedence.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const HOST = 'www.shop.example';
/** Every status carries the operator's proof (status-proof.ts): the rules as they were. */
const PROVEN = (): boolean => true;

interface Options {
  hostname?: string;
  serving?: boolean;
  created?: string;
  deleting?: boolean;
  finalizers?: string[];
}

/** CustomDomain `namespace/name` (uid `uid-<namespace>`); `serving`: accepted, with a valid certificate. */
function domain(namespace: string, o: Options = {}): CustomDomain {
  const hostname = o.hostname ?? HOST;
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: {
      namespace,
      name: 'www',
      uid: `uid-${namespace}`,
      creationTimestamp: new Date(o.created ?? '2026-01-01T00:00:00Z'),
      finalizers: o.finalizers ?? [FINALIZER],
      ...(o.deleting ? { deletionTimestamp: new Date('2026-06-01T11:59:00Z') } : {}),
    },
    spec: { hostname, service: { name: 'web', port: 80 } },
    ...(o.serving
      ? {
          status: {
            phase: 'Live' as const,
            conditions: [
              {
                type: 'Accepted' as const,
                status: 'True' as const,
                reason: 'Accepted',
                message: '',
                lastTransitionTime: '2026-01-01T00:00:00Z',
              },
            ],
            certificate: {
              secretName: 'www-tls',
              notBefore: '2026-05-01T00:00:00Z',
              notAfter: '2026-07-30T00:00:00Z',
              renewalTime: '2026-06-30T00:00:00Z',
              serialNumber: '01',
              issuer: 'CN=Pebble',
              dnsNames: [hostname],
            },
          },
        }
      : {}),
  };
}

function claimOf(d: CustomDomain, hostname = HOST): HostnameClaim {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'HostnameClaim',
    metadata: { name: hostname, uid: 'claim-uid' },
    spec: {
      customDomainRef: { namespace: d.metadata.namespace, name: d.metadata.name, uid: d.metadata.uid ?? '' },
    },
  };
}

function facts(me: CustomDomain, f: Partial<ClaimFacts> = {}): ClaimFacts {
  return {
    me,
    hostname: HOST,
    claim: undefined,
    holder: undefined,
    rivals: [],
    now: NOW,
    deployed: false,
    undeployedGraceMs: Number.POSITIVE_INFINITY,
    proven: PROVEN,
    // Every Accepted=True is the operator's: the grace rule as it reads the status.
    acceptedBefore: isAccepted,
    ...f,
  };
}

/** `d` with its Accepted condition `status` (reason NotDeployed when False), and no certificate. */
function withAccepted(d: CustomDomain, status: 'True' | 'False'): CustomDomain {
  return {
    ...d,
    status: {
      conditions: [
        {
          type: 'Accepted',
          status,
          reason: status === 'True' ? 'Accepted' : 'NotDeployed',
          message: '',
          lastTransitionTime: '2026-05-01T00:00:00Z',
        },
      ],
    },
  };
}

describe('servesHostname', () => {
  it('is true for an accepted domain with an unexpired certificate for the hostname', () => {
    expect(servesHostname(domain('a', { serving: true }), HOST, NOW, PROVEN)).toBe(true);
  });

  it('is false without a certificate, when not accepted, expired, or for another name', () => {
    expect(servesHostname(domain('a'), HOST, NOW, PROVEN)).toBe(false);
    const downgraded = domain('a', { serving: true });
    const accepted = downgraded.status?.conditions?.[0];
    if (accepted) accepted.status = 'False';
    expect(servesHostname(downgraded, HOST, NOW, PROVEN)).toBe(false);
    expect(
      servesHostname(domain('a', { serving: true }), HOST, new Date('2026-08-01T00:00:00Z'), PROVEN),
    ).toBe(false);
    expect(
      servesHostname(domain('a', { serving: true, hostname: 'api.shop.example' }), HOST, NOW, PROVEN),
    ).toBe(false);
    const otherName = domain('a', { serving: true });
    if (otherName.status?.certificate) otherName.status.certificate.dnsNames = ['other.example'];
    expect(servesHostname(otherName, HOST, NOW, PROVEN)).toBe(false);
  });

  it("counts a deleting domain while Portico's finalizer is on it, not after", () => {
    expect(servesHostname(domain('a', { serving: true, deleting: true }), HOST, NOW, PROVEN)).toBe(true);
    expect(
      servesHostname(
        domain('a', { serving: true, deleting: true, finalizers: ['e2e/hold'] }),
        HOST,
        NOW,
        PROVEN,
      ),
    ).toBe(false);
  });

  it('compares names case-insensitively and without a trailing dot', () => {
    expect(
      servesHostname(domain('a', { serving: true, hostname: 'WWW.Shop.Example.' }), HOST, NOW, PROVEN),
    ).toBe(true);
  });
});

describe('unhonouredReason', () => {
  it('honours a claim whose holder exists with the same uid and hostname', () => {
    const d = domain('a');
    expect(unhonouredReason(claimOf(d), d)).toBeUndefined();
  });

  it('names why a claim does not count', () => {
    const d = domain('a');
    expect(unhonouredReason(claimOf(d), undefined)).toBe('holder-gone');
    expect(unhonouredReason(claimOf(d), { ...d, metadata: { ...d.metadata, uid: 'new' } })).toBe(
      'holder-recreated',
    );
    // The first attack: a claim made by hand for a CustomDomain of another name.
    const other = domain('b', { hostname: 'blog.other.example' });
    expect(unhonouredReason(claimOf(other), other)).toBe('hostname-mismatch');
  });
});

describe('firstServing', () => {
  it('picks the oldest serving domain, then the smallest namespace/name', () => {
    const old = domain('z', { serving: true, created: '2025-01-01T00:00:00Z' });
    const young = domain('a', { serving: true, created: '2026-01-01T00:00:00Z' });
    const twin = domain('b', { serving: true, created: '2026-01-01T00:00:00Z' });
    expect(firstServing([young, old, domain('c')], HOST, NOW, PROVEN)).toBe(old);
    expect(firstServing([twin, young], HOST, NOW, PROVEN)).toBe(young);
    expect(firstServing([domain('c')], HOST, NOW, PROVEN)).toBeUndefined();
  });
});

describe('claimVerdict', () => {
  const live = domain('live', { serving: true });
  const newcomer = domain('new');

  it('creates a missing claim when nobody serves the hostname', () => {
    expect(claimVerdict(facts(newcomer))).toBe('create');
    expect(claimVerdict(facts(newcomer, { rivals: [domain('other')] }))).toBe('create');
  });

  it('does not take a free hostname that a serving rival comes first for', () => {
    expect(claimVerdict(facts(newcomer, { rivals: [live] }))).toBe('taken');
    // The serving domain itself takes it back.
    expect(claimVerdict(facts(live, { rivals: [newcomer] }))).toBe('create');
  });

  it('keeps a counted claim and leaves a counted claim of another non-serving holder alone', () => {
    const holder = domain('holder');
    expect(claimVerdict(facts(holder, { claim: claimOf(holder), holder }))).toBe('held');
    expect(claimVerdict(facts(newcomer, { claim: claimOf(holder), holder, rivals: [holder] }))).toBe('taken');
  });

  it('replaces a claim naming a domain of another hostname (first attack)', () => {
    const elsewhere = domain('elsewhere', { hostname: 'blog.other.example' });
    const f = { claim: claimOf(elsewhere), holder: elsewhere };
    expect(claimVerdict(facts(newcomer, f))).toBe('replace');
    // ... but leaves it to a serving rival when there is one.
    expect(claimVerdict(facts(newcomer, { ...f, rivals: [live] }))).toBe('taken');
    expect(claimVerdict(facts(live, { ...f, rivals: [newcomer] }))).toBe('replace');
  });

  it("gives a hand-made claim naming another tenant's non-serving domain back to the Live one (second attack)", () => {
    const f = { claim: claimOf(newcomer), holder: newcomer };
    expect(claimVerdict(facts(live, { ...f, rivals: [newcomer] }))).toBe('replace');
    // The named domain does not treat the claim as its own while the Live one comes first.
    expect(claimVerdict(facts(newcomer, { ...f, rivals: [live] }))).toBe('taken');
  });

  it('replaces the claim of a vanished holder unless a serving rival comes first', () => {
    const gone = domain('gone');
    expect(claimVerdict(facts(newcomer, { claim: claimOf(gone) }))).toBe('replace');
    expect(claimVerdict(facts(newcomer, { claim: claimOf(gone), rivals: [live] }))).toBe('taken');
  });

  it('with two serving domains, the serving holder keeps the claim and the other defers', () => {
    const older = domain('older', { serving: true, created: '2025-01-01T00:00:00Z' });
    const f = { claim: claimOf(live), holder: live };
    // The holder is younger than its rival and still keeps it: no swapping back and forth.
    expect(claimVerdict(facts(live, { ...f, rivals: [older] }))).toBe('held');
    expect(claimVerdict(facts(older, { ...f, rivals: [live] }))).toBe('taken');
    // With no claim, or one naming a non-serving domain, only the older takes it.
    expect(claimVerdict(facts(live, { rivals: [older] }))).toBe('taken');
    expect(claimVerdict(facts(older, { rivals: [live] }))).toBe('create');
    const g = { claim: claimOf(newcomer), holder: newcomer };
    expect(claimVerdict(facts(live, { ...g, rivals: [older, newcomer] }))).toBe('taken');
    expect(claimVerdict(facts(older, { ...g, rivals: [live, newcomer] }))).toBe('replace');
  });

  it('ignores the reconciled domain among its rivals', () => {
    expect(claimVerdict(facts(newcomer, { rivals: [newcomer] }))).toBe('create');
  });
});

describe('a holder that is never accepted', () => {
  const HOUR = 3_600_000;
  // Created 2 h before NOW.
  const undeployed = withAccepted(domain('idle', { created: '2026-06-01T10:00:00Z' }), 'False');
  const claim = claimOf(undeployed);
  /** `undeployed` as it would be before the API server stored it: no creation time. */
  const unstoredMeta = { ...undeployed.metadata };
  delete unstoredMeta.creationTimestamp;
  const unstored: CustomDomain = { ...undeployed, metadata: unstoredMeta };
  const deployedClaimant = domain('deployed');

  it('isAccepted reads the Accepted condition', () => {
    expect(isAccepted(undeployed)).toBe(false);
    expect(isAccepted(domain('fresh'))).toBe(false); // no status yet
    expect(isAccepted(withAccepted(domain('a'), 'True'))).toBe(true);
  });

  it("holdLapsesAt counts the grace from the holder's creation", () => {
    expect(holdLapsesAt(undeployed, HOUR)).toEqual(new Date('2026-06-01T11:00:00Z'));
    expect(holdLapsesAt(unstored, HOUR)).toBeUndefined();
    expect(holdLapsesAt(undeployed, Number.POSITIVE_INFINITY)).toBeUndefined();
  });

  it('holdLapsed: only an unaccepted holder, only once the grace is over (its last instant included)', () => {
    expect(holdLapsed(undeployed, HOUR, NOW, isAccepted)).toBe(true);
    expect(holdLapsed(undeployed, 2 * HOUR, NOW, isAccepted)).toBe(true);
    expect(holdLapsed(undeployed, 2 * HOUR + 1, NOW, isAccepted)).toBe(false);
    const accepted = withAccepted(domain('idle', { created: '2026-06-01T10:00:00Z' }), 'True');
    expect(holdLapsed(accepted, HOUR, NOW, isAccepted)).toBe(false);
    // The same status, its Accepted=True not the operator's (acceptance.ts acceptedBefore false).
    expect(holdLapsed(accepted, HOUR, NOW, () => false)).toBe(true);
    expect(holdLapsed(accepted, 3 * HOUR, NOW, () => false)).toBe(false);
  });

  it('a holder whose Accepted=True the operator did not write (written by a status writer) loses its hold after the grace', () => {
    const forged = withAccepted(domain('idle', { created: '2026-06-01T10:00:00Z' }), 'True');
    const notOperators = (d: CustomDomain): boolean =>
      d.metadata.uid !== forged.metadata.uid && isAccepted(d);
    const base = {
      claim: claimOf(forged),
      holder: forged,
      rivals: [forged],
      deployed: true,
      undeployedGraceMs: HOUR,
    };
    expect(claimVerdict(facts(deployedClaimant, base))).toBe('taken');
    expect(claimVerdict(facts(deployedClaimant, { ...base, acceptedBefore: notOperators }))).toBe(
      'take-over',
    );
    // Within the grace, or for a claimant not deployed, it keeps the hold as any undeployed holder.
    expect(
      claimVerdict(
        facts(deployedClaimant, { ...base, undeployedGraceMs: 3 * HOUR, acceptedBefore: notOperators }),
      ),
    ).toBe('taken');
    expect(
      claimVerdict(facts(deployedClaimant, { ...base, deployed: false, acceptedBefore: notOperators })),
    ).toBe('taken');
  });

  const cases: {
    name: string;
    holder: CustomDomain;
    deployed: boolean;
    graceMs: number;
    rivals?: CustomDomain[];
    verdict: string;
  }[] = [
    {
      name: 'grace over, claimant deployed',
      holder: undeployed,
      deployed: true,
      graceMs: HOUR,
      verdict: 'take-over',
    },
    { name: 'grace of 0', holder: undeployed, deployed: true, graceMs: 0, verdict: 'take-over' },
    { name: 'grace not over', holder: undeployed, deployed: true, graceMs: 3 * HOUR, verdict: 'taken' },
    { name: 'claimant not deployed', holder: undeployed, deployed: false, graceMs: HOUR, verdict: 'taken' },
    {
      name: 'holder accepted (deployed, scaled to zero since)',
      holder: withAccepted(domain('idle', { created: '2026-06-01T10:00:00Z' }), 'True'),
      deployed: true,
      graceMs: HOUR,
      verdict: 'taken',
    },
    {
      name: 'holder with no status yet',
      holder: domain('idle', { created: '2026-06-01T10:00:00Z' }),
      deployed: true,
      graceMs: HOUR,
      verdict: 'take-over',
    },
    {
      name: 'holder without a creation time',
      holder: unstored,
      deployed: true,
      graceMs: HOUR,
      verdict: 'taken',
    },
    {
      name: 'a serving rival comes first (it replaces the claim itself)',
      holder: undeployed,
      deployed: true,
      graceMs: HOUR,
      rivals: [domain('live', { serving: true })],
      verdict: 'taken',
    },
    {
      name: 'grace infinite',
      holder: undeployed,
      deployed: true,
      graceMs: Number.POSITIVE_INFINITY,
      verdict: 'taken',
    },
  ];
  it.each(cases)('$name: $verdict', (c) => {
    expect(
      claimVerdict(
        facts(deployedClaimant, {
          claim: claimOf(c.holder),
          holder: c.holder,
          rivals: [c.holder, ...(c.rivals ?? [])],
          deployed: c.deployed,
          undeployedGraceMs: c.graceMs,
        }),
      ),
    ).toBe(c.verdict);
  });

  it('the holder itself keeps its claim whatever the grace; a serving claimant replaces it at once', () => {
    expect(
      claimVerdict(facts(undeployed, { claim, holder: undeployed, deployed: false, undeployedGraceMs: 0 })),
    ).toBe('held');
    const live = domain('live', { serving: true });
    expect(
      claimVerdict(
        facts(live, {
          claim,
          holder: undeployed,
          rivals: [undeployed],
          deployed: true,
          undeployedGraceMs: 3 * HOUR,
        }),
      ),
    ).toBe('replace');
  });
});

describe('a status the operator did not prove never makes a domain serve (docs/customdomains.md, "What status Portico trusts")', () => {
  const forgedOnly =
    (...forged: CustomDomain[]) =>
    (d: CustomDomain): boolean =>
      !forged.some((f) => f.metadata.uid === d.metadata.uid);

  it('a domain whose status says Accepted with a certificate, unproven, does not take the claim of an accepted holder', () => {
    const holder = withAccepted(domain('a'), 'True');
    const forger = domain('b', { serving: true });
    const claim = claimOf(holder);
    expect(claimVerdict(facts(forger, { claim, holder, rivals: [holder] }))).toBe('replace');
    expect(claimVerdict(facts(forger, { claim, holder, rivals: [holder], proven: forgedOnly(forger) }))).toBe(
      'taken',
    );
    expect(servesHostname(forger, HOST, NOW, forgedOnly(forger))).toBe(false);
  });

  it('an unproven serving rival does not keep a claimant from a free hostname, nor a holder from its claim', () => {
    const me = withAccepted(domain('a'), 'True');
    const forger = domain('b', { serving: true });
    expect(claimVerdict(facts(me, { rivals: [forger] }))).toBe('taken');
    expect(claimVerdict(facts(me, { rivals: [forger], proven: forgedOnly(forger) }))).toBe('create');
    const claim = claimOf(me);
    expect(claimVerdict(facts(me, { claim, holder: me, rivals: [forger], proven: forgedOnly(forger) }))).toBe(
      'held',
    );
  });
});
