import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../api/customdomain.js';
import { acceptance, claimHolder, planOf, reservedDomainOf, type AcceptanceFacts } from './acceptance.js';

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
  holder: 'shop/www',
  key: 'shop/www',
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
    const taken = acceptance({ ...ok, holder: 'other-tenant/www' });
    expect(taken.reason).toBe('HostnameAlreadyClaimed');
    expect(taken.message).not.toContain('other-tenant');
  });
});

describe('claims and labels', () => {
  const base = { hostname: 'www.example.com', uid: 'b', eligible: true, accepted: false };
  it('gives the hostname to the oldest eligible claimant, whatever the list order', () => {
    const claimants = [
      { ...base, key: 'b/www', creationTimestamp: '2026-01-02T00:00:00Z' },
      { ...base, key: 'a/www', creationTimestamp: '2026-01-01T00:00:00Z', eligible: false },
      { ...base, key: 'c/www', creationTimestamp: '2026-01-03T00:00:00Z' },
    ];
    expect(claimHolder('www.example.com', claimants)).toBe('b/www');
    expect(claimHolder('www.example.com', [...claimants].reverse())).toBe('b/www');
  });

  it('leaves the claim with the one already accepted, even if another is older', () => {
    const claimants = [
      { ...base, key: 'old/www', creationTimestamp: '2026-01-01T00:00:00Z' },
      { ...base, key: 'holder/www', creationTimestamp: '2026-01-02T00:00:00Z', accepted: true },
    ];
    expect(claimHolder('www.example.com', claimants)).toBe('holder/www');
  });

  it('breaks a same-second tie by uid', () => {
    const t = '2026-01-01T00:00:00Z';
    const claimants = [
      { ...base, key: 'x/www', creationTimestamp: t, uid: 'f' },
      { ...base, key: 'y/www', creationTimestamp: t, uid: 'a' },
    ];
    expect(claimHolder('www.example.com', claimants)).toBe('y/www');
  });

  it('reads the plan label (free when missing) and matches reserved domains by label boundary', () => {
    expect(planOf(undefined)).toBe('free');
    expect(planOf({ 'portico.dev/plan': 'Business' })).toBe('business');
    expect(reservedDomainOf('a.platform.example', ['platform.example'])).toBe('platform.example');
    expect(reservedDomainOf('notplatform.example', ['platform.example'])).toBeUndefined();
  });
});
