/**
 * The Accepted gates on the real API server: plan (namespace label), first deploy (a ready
 * endpoint), reserved hostnames, and one claim per hostname across namespaces.
 */
import { describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  kube,
  markDeployed,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';

const target = sandbox.platformCnameTarget;

describe('plan gating', () => {
  it('refuses the free plan (and an unlabelled namespace), then accepts at once on upgrade', async () => {
    const ns = unique('free');
    const hostname = `www.${ns}.example`;
    await createProject(ns, { plan: null });
    await dns.setCname(hostname, target);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'www', 'Accepted', 'False', 'PlanNotEligible');
    const message = cd.status?.conditions?.find((c) => c.type === 'Accepted')?.message ?? '';
    expect(message).toContain('Pro plan or above');
    expect(message).toContain('free plan');
    expect(cd.status?.phase).toBe('Pending');
    expect(cd.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('PlanNotEligible');
    await expect(
      kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-www' }),
    ).rejects.toMatchObject({
      code: 404,
    });

    await kube().core.patchNamespace({
      name: ns,
      body: [{ op: 'add', path: '/metadata/labels', value: { 'portico.dev/plan': 'business' } }],
    });
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 30_000);
  });
});

describe('deploy gating', () => {
  it('waits for a first ready endpoint, then goes Live without any other change', async () => {
    const ns = unique('undeployed');
    const hostname = `www.${ns}.example`;
    await createProject(ns, { deployed: false });
    await dns.setCname(hostname, target);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'www', 'Accepted', 'False', 'NotDeployed');
    expect(cd.status?.conditions?.find((c) => c.type === 'Accepted')?.message).toContain('no ready endpoint');
    await markDeployed(ns);
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 30_000);
  });
});

describe('takeover safety', () => {
  it('accepts exactly one of two CustomDomains with the same hostname, the first created', async () => {
    const first = unique('claim-a');
    const second = unique('claim-b');
    const hostname = `${unique('shared')}.tenant.example`;
    await createProject(first);
    await createProject(second);
    await dns.setCname(hostname, target);
    await createCustomDomain(first, 'shared', { hostname, service: { name: 'web' } });
    await waitForCondition(first, 'shared', 'Accepted', 'True');
    await createCustomDomain(second, 'shared', { hostname, service: { name: 'web' } });
    const loser = await waitForCondition(second, 'shared', 'Accepted', 'False', 'HostnameAlreadyClaimed');
    const message = loser.status?.conditions?.find((c) => c.type === 'Accepted')?.message ?? '';
    expect(message).toContain(hostname);
    expect(message).not.toContain(first);
    expect(message).not.toContain('shared/');
    await waitForCondition(first, 'shared', 'Ready', 'True');
    expect(
      (await getCustomDomain(second, 'shared')).status?.conditions?.find((c) => c.type === 'Accepted')
        ?.status,
    ).toBe('False');

    // Once the first is gone, routing and all, the claim passes to the second.
    await kube().custom.deleteNamespacedCustomObject({
      group: 'portico.dev',
      version: 'v1alpha1',
      namespace: first,
      plural: 'customdomains',
      name: 'shared',
    });
    await waitFor('the first claim to be gone', async () => {
      try {
        await getCustomDomain(first, 'shared');
        return undefined;
      } catch (err) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
    await waitForCondition(second, 'shared', 'Ready', 'True', undefined, 30_000);
  });

  it('gives the hostname to the same one whatever the order the operator sees them in', async () => {
    // Both are created back to back; whichever the API server stamped first holds the claim.
    const a = unique('race-a');
    const b = unique('race-b');
    const hostname = `race.${a}.example`;
    await createProject(a);
    await createProject(b);
    await dns.setCname(hostname, target);
    await Promise.all([
      createCustomDomain(a, 'race', { hostname, service: { name: 'web' } }),
      createCustomDomain(b, 'race', { hostname, service: { name: 'web' } }),
    ]);
    // Two claims reconciled at the same moment can both be accepted for an instant (each before the
    // cache shows the other); the next reconcile of each settles it. Wait for one True and one False.
    const states = await waitFor('the claims to settle on one holder', async () => {
      const both = await Promise.all([getCustomDomain(a, 'race'), getCustomDomain(b, 'race')]);
      const accepted = both.map((cd) => cd.status?.conditions?.find((c) => c.type === 'Accepted')?.status);
      return accepted.includes('True') && accepted.includes('False') ? { both, accepted } : undefined;
    });
    expect(states.accepted.filter((s) => s === 'True')).toHaveLength(1);
    const holder = states.accepted.indexOf('True');
    // The claim does not move afterwards: a resync or any later event gives the same verdict.
    await new Promise((r) => setTimeout(r, 3_000));
    const again = await Promise.all([getCustomDomain(a, 'race'), getCustomDomain(b, 'race')]);
    const acceptedAgain = again.map(
      (cd) => cd.status?.conditions?.find((c) => c.type === 'Accepted')?.status,
    );
    expect(acceptedAgain.indexOf('True')).toBe(holder);
    expect(acceptedAgain.filter((s) => s === 'True')).toHaveLength(1);
    expect(again[1 - holder]?.status?.conditions?.find((c) => c.type === 'Accepted')?.reason).toBe(
      'HostnameAlreadyClaimed',
    );
  });
});

describe('reserved hostnames', () => {
  it('refuses the platform target itself and names under it', async () => {
    const ns = unique('reserved');
    await createProject(ns);
    await createCustomDomain(ns, 'target', { hostname: `x.${target}`, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'target', 'Accepted', 'False', 'ReservedHostname');
    expect(cd.status?.conditions?.find((c) => c.type === 'Accepted')?.message).toContain(target);
  });
});
