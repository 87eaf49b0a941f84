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
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
  deleteCustomDomain,
  getHostnameClaim,
  hostnameClaim,
  hostnameClaimApi,
  customDomainApi,
} from './support/cluster.js';
import type { CustomDomain } from '../../src/api/customdomain.js';

const target = sandbox.platformCnameTarget;

/**
 * Two projects on an eligible plan with CustomDomain `www` for one hostname: the first Ready and
 * holding it, the second refused with HostnameAlreadyClaimed. Returns both namespaces and the hostname.
 */
async function holderAndContender(
  prefix: string,
  hostPrefix: string,
): Promise<{ first: string; second: string; hostname: string }> {
  const first = unique(`${prefix}-a`);
  const second = unique(`${prefix}-b`);
  const hostname = `${unique(hostPrefix)}.tenant.example`;
  await Promise.all([createProject(first), createProject(second), dns.setCname(hostname, target)]);
  await createCustomDomain(first, 'www', { hostname, service: { name: 'web' } });
  await waitForCondition(first, 'www', 'Ready', 'True', undefined, 60_000);
  await createCustomDomain(second, 'www', { hostname, service: { name: 'web' } });
  await waitForCondition(second, 'www', 'Accepted', 'False', 'HostnameAlreadyClaimed');
  return { first, second, hostname };
}

/**
 * A hostname handed on from another project needs the ownership TXT record (the operator's default
 * --ownership-verification=recently-claimed; test/e2e/takeover.test.ts): waits until `name` asks
 * for it, publishes the record status.dnsRecords names, and requests a check.
 */
async function showOwnership(namespace: string, name: string): Promise<void> {
  const cd = await waitForCondition(namespace, name, 'DNSVerified', 'False', 'OwnershipNotVerified', 60_000);
  const txt = cd.status?.dnsRecords?.find((r) => r.type === 'TXT');
  if (!txt) throw new Error(`${namespace}/${name} shows no TXT record in status.dnsRecords`);
  await dns.post('/set-txt', { host: `${txt.name}.`, value: txt.value });
  await requestVerify(namespace, name);
}

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
    await deleteCustomDomain(first, 'shared');
    await waitFor('the first claim to be gone', async () => {
      try {
        await getCustomDomain(first, 'shared');
        return undefined;
      } catch (err) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
    await showOwnership(second, 'shared');
    await waitForCondition(second, 'shared', 'Ready', 'True', undefined, 30_000);
  });

  it("hands the hostname on only once the holder's routing is gone, even before the holder object is", async () => {
    const { first, second, hostname } = await holderAndContender('handover', 'handover');
    // A finalizer of the test's own keeps the first object after Portico is done with it.
    await kube().custom.patchNamespacedCustomObject({
      ...customDomainApi,
      namespace: first,
      name: 'www',
      body: [{ op: 'add', path: '/metadata/finalizers/-', value: 'e2e.portico.dev/hold' }],
    });
    await deleteCustomDomain(first, 'www');
    await waitForCondition(second, 'www', 'Accepted', 'True', undefined, 60_000);
    // The moment the second holds the hostname, the first's Ingress is already gone, while the first
    // CustomDomain itself still exists.
    await expect(
      kube().networking.readNamespacedIngress({ namespace: first, name: 'portico-www' }),
    ).rejects.toMatchObject({ code: 404 });
    const held = await getCustomDomain(first, 'www');
    expect(held.metadata.deletionTimestamp).toBeDefined();
    expect(held.metadata.finalizers).toEqual(['e2e.portico.dev/hold']);
    expect((await getHostnameClaim(hostname))?.spec.customDomainRef).toMatchObject({
      namespace: second,
      name: 'www',
    });
    await kube().custom.patchNamespacedCustomObject({
      ...customDomainApi,
      namespace: first,
      name: 'www',
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });
    await showOwnership(second, 'www');
    await waitForCondition(second, 'www', 'Ready', 'True', undefined, 60_000);
  });

  it('never accepts two at once when both are created at the same moment', async () => {
    // Five pairs, each pair created in parallel. The claim is an atomic create of a HostnameClaim,
    // so no read at any moment sees both Accepted=True, whichever the operator reconciles first.
    const rounds = await Promise.all(
      Array.from({ length: 5 }, async (_, i) => {
        const a = unique(`race${String(i)}-a`);
        const b = unique(`race${String(i)}-b`);
        const hostname = `race.${a}.example`;
        await Promise.all([createProject(a), createProject(b), dns.setCname(hostname, target)]);
        return { a, b, hostname };
      }),
    );
    const acceptedOf = (cd: CustomDomain): string | undefined =>
      cd.status?.conditions?.find((c) => c.type === 'Accepted')?.status;
    let reads = 0;
    let bothTrue = 0;
    const settled = await Promise.all(
      rounds.map(async ({ a, b, hostname }) => {
        await Promise.all([
          createCustomDomain(a, 'race', { hostname, service: { name: 'web' } }),
          createCustomDomain(b, 'race', { hostname, service: { name: 'web' } }),
        ]);
        return waitFor(
          `one holder of ${hostname}`,
          async () => {
            const both = await Promise.all([getCustomDomain(a, 'race'), getCustomDomain(b, 'race')]);
            const accepted = both.map(acceptedOf);
            reads += 1;
            if (accepted[0] === 'True' && accepted[1] === 'True') bothTrue += 1;
            return accepted.includes('True') && accepted.includes('False') ? { both, accepted } : undefined;
          },
          60_000,
          20,
        );
      }),
    );
    expect(bothTrue, `reads with both Accepted (of ${String(reads)})`).toBe(0);

    // Each hostname's HostnameClaim names the accepted one; the other says the hostname is taken,
    // and the verdict does not move afterwards.
    await new Promise((r) => setTimeout(r, 3_000));
    for (const [i, { a, b, hostname }] of rounds.entries()) {
      const holder = settled[i]?.accepted.indexOf('True') ?? -1;
      const namespaces = [a, b];
      expect((await getHostnameClaim(hostname))?.spec.customDomainRef).toMatchObject({
        namespace: namespaces[holder],
        name: 'race',
      });
      const again = await Promise.all([getCustomDomain(a, 'race'), getCustomDomain(b, 'race')]);
      expect(again.map(acceptedOf)).toEqual(settled[i]?.accepted);
      expect(again[1 - holder]?.status?.conditions?.find((c) => c.type === 'Accepted')?.reason).toBe(
        'HostnameAlreadyClaimed',
      );
    }
  });

  it("passes the hostname on when the holder's plan no longer allows custom domains", async () => {
    const { first, second, hostname } = await holderAndContender('downgrade', 'moving');

    await kube().core.patchNamespace({
      name: first,
      body: [{ op: 'replace', path: '/metadata/labels/portico.dev~1plan', value: 'free' }],
    });
    await waitForCondition(first, 'www', 'Accepted', 'False', 'PlanNotEligible');
    await expect(
      kube().networking.readNamespacedIngress({ namespace: first, name: 'portico-www' }),
    ).rejects.toMatchObject({ code: 404 });
    await showOwnership(second, 'www');
    await waitForCondition(second, 'www', 'Ready', 'True', undefined, 60_000);
    const claim = await getHostnameClaim(hostname);
    expect(claim?.spec.customDomainRef).toMatchObject({ namespace: second, name: 'www' });
  });

  it('replaces a claim whose CustomDomain no longer exists, or has another hostname', async () => {
    const ns = unique('stale');
    const hostname = `${unique('orphan')}.tenant.example`;
    await Promise.all([createProject(ns), dns.setCname(hostname, target)]);
    // A claim left by a CustomDomain deleted while no operator ran (its uid exists nowhere).
    await kube().custom.createClusterCustomObject({
      ...hostnameClaimApi,
      body: hostnameClaim(hostname, {
        namespace: 'gone',
        name: 'www',
        uid: '00000000-0000-4000-8000-000000000000',
      }),
    });
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const created = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 60_000);
    expect((await getHostnameClaim(hostname))?.spec.customDomainRef).toEqual({
      namespace: ns,
      name: 'www',
      uid: created.metadata.uid,
    });

    // A claim whose holder exists but has another hostname does not count (docs/customdomains.md,
    // "Who holds a hostname"; more in hostnameclaim-forgery.test.ts): the CustomDomain of that
    // hostname replaces it.
    const other = unique('stale-b');
    const held = `${unique('held')}.tenant.example`;
    await Promise.all([createProject(other), dns.setCname(held, target)]);
    await kube().custom.createClusterCustomObject({
      ...hostnameClaimApi,
      body: hostnameClaim(held, { namespace: ns, name: 'www', uid: created.metadata.uid ?? '' }),
    });
    await createCustomDomain(other, 'www', { hostname: held, service: { name: 'web' } });
    const taker = await waitForCondition(other, 'www', 'Accepted', 'True');
    expect((await getHostnameClaim(held))?.spec.customDomainRef).toEqual({
      namespace: other,
      name: 'www',
      uid: taker.metadata.uid,
    });
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

describe('internationalized hostnames', () => {
  it('refuses an xn-- label that is not a valid A-label, claims nothing, and accepts a valid one', async () => {
    const ns = unique('idna');
    const bad = `xn--a.${ns}.example`;
    const good = `xn--bcher-kva.${ns}.example`;
    await Promise.all([createProject(ns), dns.setCname(bad, target), dns.setCname(good, target)]);
    await createCustomDomain(ns, 'bad', { hostname: bad, service: { name: 'web' } });
    await createCustomDomain(ns, 'good', { hostname: good, service: { name: 'web' } });
    const refused = await waitForCondition(ns, 'bad', 'Accepted', 'False', 'InvalidHostname');
    expect(refused.status?.conditions?.find((c) => c.type === 'Accepted')?.message).toContain('(xn--a)');
    expect(await getHostnameClaim(bad)).toBeUndefined();
    const events = await kube().core.listNamespacedEvent({ namespace: ns });
    expect(
      events.items.some(
        (e) => e.involvedObject.name === 'bad' && e.reason === 'InvalidHostname' && e.type === 'Warning',
      ),
    ).toBe(true);
    await waitForCondition(ns, 'good', 'Ready', 'True', undefined, 60_000);
  });

  it('refuses a cluster-internal name and an emoji label (valid for browsers, not IDNA2008), claiming nothing', async () => {
    const ns = unique('claimable');
    const internal = 'kubernetes.default.svc.cluster.local';
    const emoji = `xn--ls8h.${ns}.example`;
    await Promise.all([createProject(ns), dns.setCname(emoji, target)]);
    await createCustomDomain(ns, 'internal', { hostname: internal, service: { name: 'web' } });
    await createCustomDomain(ns, 'emoji', { hostname: emoji, service: { name: 'web' } });
    const notPublic = await waitForCondition(ns, 'internal', 'Accepted', 'False', 'HostnameNotPublic');
    expect(notPublic.status?.conditions?.find((c) => c.type === 'Accepted')?.message).toContain(
      `${internal} is under .local, a name that never resolves on the public internet`,
    );
    const disallowed = await waitForCondition(
      ns,
      'emoji',
      'Accepted',
      'False',
      'HostnameDisallowedCharacter',
    );
    expect(disallowed.status?.conditions?.find((c) => c.type === 'Accepted')?.message).toContain('U+1F4A9');
    expect(await getHostnameClaim(internal)).toBeUndefined();
    expect(await getHostnameClaim(emoji)).toBeUndefined();
  });
});
