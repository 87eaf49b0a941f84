/**
 * Ownership from what a tenant cannot forge (docs/customdomains.md, "What status Portico trusts" and
 * "Ownership verification"), on the real stack (kube-apiserver, Pebble, pebble-challtestsrv, the
 * stack's operator with its default `recently-claimed` policy):
 *
 * - A DNS outcome written into status by someone other than the operator (`DNSVerified=True`, or a
 *   `verifiedAt` alone) gets no route, no certificate and does not verify the domain: the operator
 *   checks DNS again and asks for the ownership TXT record. The chart's tenant role cannot write
 *   `customdomains/status`, so these cases use the admin identity, which can (an operator or a
 *   platform tool with that right, misused).
 * - An `Accepted=True` written into status by someone other than the operator (the admin, for the
 *   same reason) on a domain whose Service has no ready endpoint: the deploy gate is asked again,
 *   the domain stays `NotDeployed`, with no route and no certificate order, until the project
 *   really deploys.
 * - A route at Portico's name for the domain, with its labels and a controller ownerReference to
 *   the domain but of another ingress class than Portico's (written by the admin, which, unlike the
 *   tenant role, may also write the forged `Accepted=True` beside it): it is not the operator's
 *   evidence that the domain was accepted (routing/routing-class.ts), so the deploy gate holds.
 *   This case runs an operator of its own with `--ingress-class portico` (the chart's default
 *   class; the shared stack's operator has none, and without a class any route counts).
 * - A namespace deleted and created again under the same name is another project: the hostname its
 *   former self released needs the TXT record. No kube-controller-manager runs here, so the test does
 *   what its namespace controller would: deletes what the namespace holds, then removes the
 *   namespace's `kubernetes` finalizer through the `finalize` subresource.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import { CUSTOM_DOMAIN_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../src/api/customdomain.js';
import { SANDBOX_INGRESS_CLASS as CLASS } from '../../src/sandbox/admission.js';
import {
  createCustomDomain,
  createProject,
  customDomainApi,
  deleteCustomDomain,
  dns,
  domainCondition,
  getCustomDomain,
  kube,
  markDeployed,
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

const isNotFound = (err: unknown): boolean => (err as { code?: number }).code === 404;

async function exists(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

/** Whether the domain's Ingress (`portico-<name>`) or certificate Secret (`<name>-tls`) exists. */
async function routeOrCertificate(ns: string, name: string): Promise<string[]> {
  const found: string[] = [];
  if (await exists(() => kube().networking.readNamespacedIngress({ namespace: ns, name: `portico-${name}` })))
    found.push(`Ingress ${ns}/portico-${name}`);
  if (await exists(() => kube().core.readNamespacedSecret({ namespace: ns, name: `${name}-tls` })))
    found.push(`Secret ${ns}/${name}-tls`);
  return found;
}

/** The ingress class of Ingress `ns/name` (`spec.ingressClassName`; '' for none), or undefined when it does not exist. */
async function ingressClassAt(ns: string, name: string): Promise<string | undefined> {
  try {
    return (
      (await kube().networking.readNamespacedIngress({ namespace: ns, name })).spec?.ingressClassName ?? ''
    );
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function waitGone(ns: string, name: string): Promise<void> {
  await waitFor(`${ns}/${name} gone`, async () =>
    (await exists(() => getCustomDomain(ns, name))) ? undefined : true,
  );
}

/**
 * A hostname another project held and released (its CustomDomain deleted, the CNAME left in place:
 * the dangling record a takeover would use), then asked for by `claimant`'s CustomDomain `www`,
 * which waits for the ownership TXT record.
 */
async function releasedHostnameClaimedBy(
  claimant: string,
): Promise<{ hostname: string; waiting: CustomDomain }> {
  const former = unique('own-former');
  const hostname = `www.${former}.example`;
  await createProject(former);
  await createProject(claimant);
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(former, 'www', { hostname, service: { name: 'web' } });
  await waitForCondition(former, 'www', 'Accepted', 'True', undefined, 60_000);
  await deleteCustomDomain(former, 'www');
  await waitGone(former, 'www');
  await createCustomDomain(claimant, 'www', { hostname, service: { name: 'web' } });
  const waiting = await waitForCondition(
    claimant,
    'www',
    'DNSVerified',
    'False',
    'OwnershipNotVerified',
    90_000,
  );
  expect(waiting.status?.ownership).toMatchObject({ required: true, reason: 'RecentlyClaimed' });
  return { hostname, waiting };
}

/**
 * Writes `forge(status)` through the status subresource as the admin, retrying on a conflict with
 * the operator's own writes; returns the time of the write.
 */
async function forgeStatus(
  ns: string,
  name: string,
  forge: (cd: CustomDomain) => CustomDomain['status'],
): Promise<Date> {
  return waitFor(`the forged status of ${ns}/${name} written`, async () => {
    const cd = await getCustomDomain(ns, name);
    const at = new Date();
    try {
      await kube().custom.replaceNamespacedCustomObjectStatus({
        ...customDomainApi,
        namespace: ns,
        name,
        body: { ...cd, status: forge(cd) },
      });
      return at;
    } catch (err) {
      if ((err as { code?: number }).code === 409) return undefined;
      throw err;
    }
  });
}

/** Waits for the operator's next DNS check after `since` (status.observed.checkedAt later than it). */
async function checkedAfter(ns: string, name: string, since: Date): Promise<CustomDomain> {
  return waitFor(
    `a DNS check of ${ns}/${name} after ${since.toISOString()}`,
    async () => {
      const cd = await getCustomDomain(ns, name);
      const checkedAt = cd.status?.observed?.checkedAt;
      return checkedAt !== undefined && Date.parse(checkedAt) > since.getTime() ? cd : undefined;
    },
    90_000,
  );
}

const inAnHour = (): string => new Date(Date.now() + 3_600_000).toISOString();

describe('a DNS outcome written into status by someone other than the operator', () => {
  it('DNSVerified=True (written by an admin: the chart’s tenant role cannot write status) on a released hostname: checked again, OwnershipNotVerified, no route, no certificate', async () => {
    const ns = unique('own-forge-dns');
    const { waiting } = await releasedHostnameClaimedBy(ns);
    const forgedAt = await forgeStatus(ns, 'www', (cd) => ({
      ...cd.status,
      conditions: (cd.status?.conditions ?? []).map((c) =>
        c.type === 'DNSVerified' ? { ...c, status: 'True', reason: 'RecordMatches', message: 'forged' } : c,
      ),
      verifiedAt: new Date().toISOString(),
      // The next check an hour away: before the proof, the forged outcome was carried until then.
      observed: { ...(cd.status?.observed ?? waiting.status?.observed), nextCheckAt: inAnHour() } as never,
    }));
    const after = await checkedAfter(ns, 'www', forgedAt);
    expect(domainCondition(after, 'DNSVerified')).toMatchObject({
      status: 'False',
      reason: 'OwnershipNotVerified',
    });
    expect(after.status?.verifiedAt).toBeUndefined();
    expect(after.status?.observed?.proof).toMatch(/^[\w-]{43}$/);
    expect(after.status?.ownership).toMatchObject({ required: true, reason: 'RecentlyClaimed' });
    expect(after.status?.ownership?.verifiedAt).toBeUndefined();
    expect(domainCondition(after, 'CertificateReady').reason).toBe('AwaitingDNSVerification');
    expect(domainCondition(after, 'Routed').status).toBe('False');
    expect(after.status?.phase).not.toBe('Live');
    expect(await routeOrCertificate(ns, 'www')).toEqual([]);
    await deleteCustomDomain(ns, 'www');
  });

  it('a verifiedAt alone (written by an admin: the chart’s tenant role cannot write status): no Ingress written, verifiedAt dropped', async () => {
    const ns = unique('own-forge-at');
    await releasedHostnameClaimedBy(ns);
    const forgedAt = await forgeStatus(ns, 'www', (cd) => ({
      ...cd.status,
      verifiedAt: new Date().toISOString(),
      ...(cd.status?.observed ? { observed: { ...cd.status.observed, nextCheckAt: inAnHour() } } : {}),
    }));
    const after = await checkedAfter(ns, 'www', forgedAt);
    expect(after.status?.verifiedAt).toBeUndefined();
    expect(domainCondition(after, 'DNSVerified')).toMatchObject({
      status: 'False',
      reason: 'OwnershipNotVerified',
    });
    expect(domainCondition(after, 'Routed').status).toBe('False');
    expect(await routeOrCertificate(ns, 'www')).toEqual([]);
    await deleteCustomDomain(ns, 'www');
  });
});

describe('an Accepted=True written into status by someone other than the operator', () => {
  it('on a domain whose Service has no ready endpoint (written by an admin: the chart’s tenant role cannot write status): the deploy gate is asked again, NotDeployed, no route, no certificate order', async () => {
    const ns = unique('own-forge-acc');
    const hostname = `www.${ns}.example`;
    await createProject(ns, { deployed: false });
    // DNS points at the platform: only the deploy gate stands between the domain and Live.
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Accepted', 'False', 'NotDeployed');

    const forgedAt = await forgeStatus(ns, 'www', (cd) => ({
      ...cd.status,
      conditions: (cd.status?.conditions ?? []).map((c) =>
        c.type === 'Accepted' ? { ...c, status: 'True', reason: 'Accepted', message: 'forged' } : c,
      ),
    }));
    // A change the tenant may make, so that the operator reconciles the forged status whatever
    // queues it (before the proof was asked, this reconcile latched the gate and went on to Live).
    await requestVerify(ns, 'www');
    // The operator's own verdict written over the forged one: Accepted turned False again after the
    // forgery (lastTransitionTime has whole seconds).
    const after = await waitFor(
      `${ns}/www Accepted=False again after the forged Accepted=True`,
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const accepted = cd.status?.conditions?.find((c) => c.type === 'Accepted');
        return accepted?.status === 'False' &&
          Date.parse(accepted.lastTransitionTime) >= Math.floor(forgedAt.getTime() / 1000) * 1000
          ? cd
          : undefined;
      },
      60_000,
    );
    expect(domainCondition(after, 'Accepted')).toMatchObject({ status: 'False', reason: 'NotDeployed' });
    expect(after.status?.phase).toBe('Pending');
    expect(domainCondition(after, 'Routed').status).toBe('False');
    expect(domainCondition(after, 'CertificateReady').status).not.toBe('True');
    expect(after.status?.certificate).toBeUndefined();
    expect(after.status?.issuance).toBeUndefined();
    expect(await routeOrCertificate(ns, 'www')).toEqual([]);

    // The same domain, once its project really deploys, goes Live: nothing else held it back.
    await markDeployed(ns);
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 90_000);
    expect(live.status?.observed?.proof).toMatch(/^[\w-]{43}$/);
    expect(await routeOrCertificate(ns, 'www')).toEqual([
      `Ingress ${ns}/portico-www`,
      `Secret ${ns}/www-tls`,
    ]);
    await deleteCustomDomain(ns, 'www');
  });
});

describe('a Live domain accepted before the status proof existed (the upgrade path)', () => {
  it('its status without a proof (as an earlier build wrote it; written here by an admin, since this build always signs its own) and its Service scaled to zero: stays accepted and routed, and its status is signed again', async () => {
    const ns = unique('own-upgrade');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 90_000);
    // Scaled to zero: the deploy gate's latch alone keeps it accepted.
    await kube().discovery.deleteNamespacedEndpointSlice({ namespace: ns, name: 'web-1' });

    const unsignedAt = await forgeStatus(ns, 'www', (cd) => {
      const observed = { ...cd.status?.observed } as NonNullable<
        NonNullable<CustomDomain['status']>['observed']
      >;
      delete observed.proof;
      return { ...cd.status, observed };
    });
    expect((await getCustomDomain(ns, 'www')).status?.observed?.proof).toBeUndefined();
    // Its first reconcile by this build (the verify request makes one now, with a DNS check).
    await requestVerify(ns, 'www');
    const after = await checkedAfter(ns, 'www', unsignedAt);
    expect(after.status?.observed?.proof).toMatch(/^[\w-]{43}$/);
    expect(domainCondition(after, 'Accepted')).toMatchObject({ status: 'True', reason: 'Accepted' });
    expect(domainCondition(after, 'Routed').status).toBe('True');
    expect(await routeOrCertificate(ns, 'www')).toEqual([
      `Ingress ${ns}/portico-www`,
      `Secret ${ns}/www-tls`,
    ]);
    await deleteCustomDomain(ns, 'www');
  });
});

describe('a namespace deleted and created again under the same name', () => {
  it('is another project: the hostname it released needs the TXT record (RecentlyClaimed), no route, no certificate', async () => {
    const ns = unique('own-reused');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    const { core, discovery } = kube();
    const before = (await core.readNamespace({ name: ns })).metadata?.uid;
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const first = await waitForCondition(ns, 'www', 'DNSVerified', 'True', undefined, 90_000);
    expect(first.status?.ownership).toMatchObject({ required: false, reason: 'NotRecentlyClaimed' });

    // What the namespace controller would do: delete the namespace's objects (the CustomDomain
    // first, whose finalizer releases the hostname), then finish the namespace's deletion.
    await deleteCustomDomain(ns, 'www');
    await waitGone(ns, 'www');
    await discovery.deleteNamespacedEndpointSlice({ namespace: ns, name: 'web-1' });
    await core.deleteNamespacedService({ namespace: ns, name: 'web' });
    await core.deleteNamespace({ name: ns });
    const terminating = await core.readNamespace({ name: ns });
    await core.replaceNamespaceFinalize({
      name: ns,
      body: { ...terminating, spec: { ...terminating.spec, finalizers: [] } },
    });
    await waitFor(`namespace ${ns} gone`, async () =>
      (await exists(() => core.readNamespace({ name: ns }))) ? undefined : true,
    );

    // Someone else's project, under the same name; the CNAME is still in place.
    await createProject(ns);
    const after = (await core.readNamespace({ name: ns })).metadata?.uid;
    expect(after).not.toBe(before);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const waiting = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'OwnershipNotVerified', 90_000);
    expect(waiting.status?.ownership).toMatchObject({ hostname, required: true, reason: 'RecentlyClaimed' });
    expect(waiting.status?.dnsRecords?.some((r) => r.type === 'TXT')).toBe(true);
    expect(domainCondition(waiting, 'CertificateReady').reason).toBe('AwaitingDNSVerification');
    expect(await routeOrCertificate(ns, 'www')).toEqual([]);
    await deleteCustomDomain(ns, 'www');
  });
});

describe('a route at Portico’s name owned by the domain but of another ingress class (an operator of its own with --ingress-class portico, the chart’s default class)', () => {
  let stack: ControllerCommand | undefined;
  let operator: OperatorProcess | undefined;
  const start = async (): Promise<OperatorProcess> => {
    if (!stack) throw new Error('the stack operator was not found');
    return startOperator(stack, 'tenant-isolation-ownership-class', { '--ingress-class': CLASS });
  };

  beforeAll(async () => {
    stack = await stopStackController();
    operator = await start();
  }, 120_000);

  afterAll(async () => {
    await runAll(
      async () => {
        if (operator) await stopOperator(operator);
      },
      () => restartStackController(stack),
    );
  }, 120_000);

  it('with an Accepted=True written into status (Ingress and status written by an admin: the chart’s tenant role cannot write status), on a domain whose Service has no ready endpoint: the route is not the operator’s, NotDeployed, no route of Portico’s class, no certificate', async () => {
    const ns = unique('own-forge-class');
    const hostname = `www.${ns}.example`;
    await createProject(ns, { deployed: false });
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const { uid } = (await waitForCondition(ns, 'www', 'Accepted', 'False', 'NotDeployed')).metadata;
    expect(uid).toBeTruthy();

    // Everything anyone may write who creates an Ingress and writes customdomains/status: the
    // operator's name for the route, its labels, a controller ownerReference to the domain, and
    // Accepted=True; only the class is not Portico's (the chart's routing-class policy refuses
    // that class to anyone but the controller). Written while no operator runs, so that the
    // operator's first look at the domain sees both at once (an attacker would race it instead).
    if (operator) await stopOperator(operator);
    operator = undefined;
    await kube().networking.createNamespacedIngress({
      namespace: ns,
      body: {
        metadata: {
          name: 'portico-www',
          namespace: ns,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [CUSTOM_DOMAIN_LABEL]: 'www' },
          ownerReferences: [
            {
              apiVersion: 'portico.dev/v1alpha1',
              kind: 'CustomDomain',
              name: 'www',
              uid: uid ?? '',
              controller: true,
            },
          ],
        },
        spec: {
          ingressClassName: 'nginx',
          rules: [
            {
              host: hostname,
              http: {
                paths: [
                  {
                    path: '/',
                    pathType: 'Prefix',
                    backend: { service: { name: 'web', port: { number: 80 } } },
                  },
                ],
              },
            },
          ],
        },
      },
    });
    const forgedAt = await forgeStatus(ns, 'www', (cd) => ({
      ...cd.status,
      conditions: (cd.status?.conditions ?? []).map((c) =>
        c.type === 'Accepted' ? { ...c, status: 'True', reason: 'Accepted', message: 'forged' } : c,
      ),
    }));
    operator = await start();

    const after = await waitFor(
      `${ns}/www Accepted=False again after the forged Accepted=True`,
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const accepted = cd.status?.conditions?.find((c) => c.type === 'Accepted');
        return accepted?.status === 'False' &&
          Date.parse(accepted.lastTransitionTime) >= Math.floor(forgedAt.getTime() / 1000) * 1000
          ? cd
          : undefined;
      },
      60_000,
    );
    expect(domainCondition(after, 'Accepted')).toMatchObject({ status: 'False', reason: 'NotDeployed' });
    expect(domainCondition(after, 'Routed').status).toBe('False');
    expect(after.status?.certificate).toBeUndefined();
    expect(after.status?.issuance).toBeUndefined();
    expect(await exists(() => kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' }))).toBe(
      false,
    );
    // The operator did not take the forged route over with its own (class portico); the forged
    // one, owned by a domain that is not accepted, it deletes.
    expect(await ingressClassAt(ns, 'portico-www')).not.toBe(CLASS);

    // The same domain, once its project really deploys, is accepted and gets the operator's own
    // route of Portico's class (no ingress controller here serves that class, so it is not Live).
    await markDeployed(ns);
    const accepted = await waitForCondition(ns, 'www', 'Accepted', 'True', undefined, 60_000);
    expect(accepted.status?.observed?.proof).toMatch(/^[\w-]{43}$/);
    await waitFor(`Ingress ${ns}/portico-www of class ${CLASS}`, async () =>
      (await ingressClassAt(ns, 'portico-www')) === CLASS ? true : undefined,
    );
    await deleteCustomDomain(ns, 'www');
  });
});
