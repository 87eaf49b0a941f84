import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../api/customdomain.js';
import { validateHostname } from '../../domain/hostname.js';
import {
  acceptance,
  acceptedBefore,
  deployState,
  planOf,
  reservedDomainOf,
  type AcceptanceFacts,
} from './acceptance.js';

const domain: CustomDomain = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'CustomDomain',
  metadata: { name: 'www', namespace: 'shop' },
  spec: { hostname: 'www.example.com', service: { name: 'web' } },
};
const ok: AcceptanceFacts = {
  domain,
  plan: 'pro',
  readyEndpoints: 1,
  previouslyAccepted: false,
  reservedDomain: undefined,
  invalidALabels: [],
  claim: 'held',
};

describe('acceptance', () => {
  it('accepts a deployed project on a paid plan that holds the hostname', () => {
    expect(acceptance(ok)).toMatchObject({ status: 'True', reason: 'Accepted' });
  });

  it('refuses the free plan, saying what to do', () => {
    const c = acceptance({ ...ok, plan: 'free' });
    expect(c).toMatchObject({ status: 'False', reason: 'PlanNotEligible' });
    expect(c.message).toContain('Pro plan or above');
    expect(c.message).toContain('free plan');
  });

  it('waits for a first deploy, and keeps acceptance once it had one', () => {
    expect(acceptance({ ...ok, readyEndpoints: 0 }).reason).toBe('NotDeployed');
    expect(acceptance({ ...ok, readyEndpoints: 0, previouslyAccepted: true }).status).toBe('True');
    expect(acceptance({ ...ok, readyEndpoints: undefined }).status).toBe('True');
  });

  it('refuses a reserved hostname and a hostname held elsewhere, without naming the holder', () => {
    expect(acceptance({ ...ok, reservedDomain: 'platform.example' }).reason).toBe('ReservedHostname');
    const taken = acceptance({ ...ok, claim: 'taken' });
    expect(taken.reason).toBe('HostnameAlreadyClaimed');
    expect(taken.message).toBe(
      'www.example.com is already attached to another project on this platform. If you own it, remove it from the other project first, or contact support.',
    );
  });

  it('tells a deployed claimant when an unused hold lapses, and the former holder that it yielded', () => {
    const waiting = acceptance({ ...ok, claim: 'taken', claimLapsesAt: new Date('2026-06-01T12:00:00Z') });
    expect(waiting.reason).toBe('HostnameAlreadyClaimed');
    expect(waiting.message).toBe(
      'www.example.com is already attached to another project on this platform. The project holding it has not been deployed yet; if it still is not at 2026-06-01T12:00:00.000Z, this domain takes the hostname over.',
    );
    const yielded = acceptance({
      ...ok,
      readyEndpoints: 0,
      claim: 'yielded',
      takenOverAt: new Date('2026-06-01T12:00:01Z'),
    });
    expect(yielded).toMatchObject({ status: 'False', reason: 'HostnameClaimYielded' });
    expect(yielded.message).toBe(
      'www.example.com was held by this CustomDomain, but the project had no successful deploy within the grace the platform allows after it was created, and another project, deployed, took the hostname over at 2026-06-01T12:00:01.000Z. If you own it, remove it from the other project first, or contact support.',
    );
    // Yielded comes before the deploy gate: the claim is gone whatever the deploy says now.
    expect(acceptance({ ...ok, claim: 'yielded' }).reason).toBe('HostnameClaimYielded');
  });

  it('refuses a hostname stored before a CRD rule it breaks, with the rule’s own message', () => {
    const stored = { ...domain, spec: { ...domain.spec, hostname: '*.example.com' } };
    const problem = validateHostname(stored.spec.hostname);
    expect(problem).toBeDefined();
    const c = acceptance({ ...ok, domain: stored, hostnameProblem: problem, claim: undefined });
    expect(c).toMatchObject({ status: 'False', reason: 'InvalidHostname' });
    expect(c.message).toContain(problem?.message ?? 'no message');
    expect(c.message).toContain(`(${problem?.reason ?? ''})`);
    expect(acceptance({ ...ok, hostnameProblem: validateHostname('www.example.com') }).status).toBe('True');
  });

  it('refuses a hostname with an invalid A-label before any other gate, naming the label', () => {
    const c = acceptance({ ...ok, plan: 'free', invalidALabels: ['xn--a'], claim: undefined });
    expect(c).toMatchObject({ status: 'False', reason: 'InvalidHostname' });
    expect(c.message).toContain('(xn--a)');
    expect(c.message).toContain('is not a valid A-label (RFC 5891)');
  });

  it('puts the plan and reserved-name gates before the claim, and the claim before the deploy gate', () => {
    expect(acceptance({ ...ok, plan: 'free', claim: undefined }).reason).toBe('PlanNotEligible');
    expect(acceptance({ ...ok, reservedDomain: 'platform.example', claim: undefined }).reason).toBe(
      'ReservedHostname',
    );
    expect(acceptance({ ...ok, claim: 'taken', readyEndpoints: 0 }).reason).toBe('HostnameAlreadyClaimed');
  });
});

describe('labels and reserved domains', () => {
  it('reads the plan label (free when missing) and matches reserved domains by label boundary', () => {
    expect(planOf(undefined)).toBe('free');
    expect(planOf({ 'portico.dev/plan': 'Business' })).toBe('business');
    expect(reservedDomainOf('a.platform.example', ['platform.example'])).toBe('platform.example');
    expect(reservedDomainOf('notplatform.example', ['platform.example'])).toBeUndefined();
  });
});

describe('accepted before, as the operator proves it (docs/customdomains.md, "What status Portico trusts")', () => {
  const withAccepted = (status: 'True' | 'False'): CustomDomain => ({
    ...domain,
    status: {
      conditions: [
        {
          type: 'Accepted',
          status,
          reason: status === 'True' ? 'Accepted' : 'NotDeployed',
          message: '',
          lastTransitionTime: '2026-06-01T00:00:00Z',
        },
      ],
    },
  });
  const accepted = withAccepted('True');
  const neither = { proven: false, routed: false };

  it('counts an Accepted=True only with the operator’s proof on the status or a route of its own', () => {
    expect(acceptedBefore(accepted, { proven: true, routed: false })).toBe(true);
    expect(acceptedBefore(accepted, { proven: false, routed: true })).toBe(true);
    // Written by someone else (a status writer), on a domain the operator never routed.
    expect(acceptedBefore(accepted, neither)).toBe(false);
  });

  it('never counts a status that does not say Accepted=True, whatever the evidence', () => {
    expect(acceptedBefore(withAccepted('False'), { proven: true, routed: true })).toBe(false);
    expect(acceptedBefore(domain, { proven: true, routed: true })).toBe(false);
  });

  it('deployState: an unproven Accepted=True with no ready endpoint is not deployed, so NotDeployed', () => {
    const forged = deployState(accepted, 0, neither);
    expect(forged).toEqual({ readyEndpoints: 0, previouslyAccepted: false, deployed: false });
    expect(acceptance({ ...ok, domain: accepted, ...forged }).reason).toBe('NotDeployed');
  });

  it('deployState: the operator’s own Accepted=True latches the gate through scale-to-zero', () => {
    for (const evidence of [
      { proven: true, routed: false },
      // Accepted by a build before the proof: its route shows it (the upgrade).
      { proven: false, routed: true },
    ]) {
      const state = deployState(accepted, 0, evidence);
      expect(state).toEqual({ readyEndpoints: 0, previouslyAccepted: true, deployed: true });
      expect(acceptance({ ...ok, domain: accepted, ...state }).status).toBe('True');
    }
  });

  it('deployState: a ready endpoint, or no Service (a redirect), is deployed without any latch', () => {
    expect(deployState(accepted, 2, neither)).toEqual({
      readyEndpoints: 2,
      previouslyAccepted: false,
      deployed: true,
    });
    expect(deployState(domain, undefined, neither)).toEqual({
      readyEndpoints: undefined,
      previouslyAccepted: false,
      deployed: true,
    });
  });
});
