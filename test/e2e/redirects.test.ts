/**
 * Redirect targets end to end (docs/customdomains.md, "Redirect targets"): a redirect domain is
 * routed only when `spec.redirect.to` is a Ready serving domain of the same project (namespace). A
 * target that is missing, of another project, a redirect itself (a chain or a loop) leaves it
 * Routed=False with its reason; a target that becomes Ready routes it, through the watch of the
 * target's status (no resync). A redirect to itself is refused by the CRD (crd-validation.test.ts).
 * The stack operator waits for the stack's Contour to take each Ingress and runs with no challenge
 * Service, so a routed redirect is Routed once Contour published its address, and an unrouted one
 * writes no Ingress. (Contour ignores the nginx flavor's redirect annotations: what Contour does
 * with a redirect is tested with the `contour` flavor's HTTPProxy.)
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getHostnameClaim,
  kube,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';

const condition = (cd: CustomDomain, type: string) => cd.status?.conditions?.find((c) => c.type === type);

/** Creates a CustomDomain whose DNS already points at the platform. */
async function domainWithDns(namespace: string, name: string, hostname: string, spec: object): Promise<void> {
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(namespace, name, { hostname, ...spec });
}

async function ingressNames(namespace: string): Promise<string[]> {
  const list = await kube().networking.listNamespacedIngress({ namespace });
  return list.items.map((i) => i.metadata?.name ?? '').sort();
}

describe('redirect targets', () => {
  const ns = unique('redir');
  const other = unique('redir-other');
  const primary = `www.${ns}.example`;
  // Its hostname does not contain its namespace, so that the message can be checked not to name it.
  const theirs = `shop.${unique('brand')}.example`;

  beforeAll(async () => {
    await Promise.all([createProject(ns), createProject(other)]);
    await domainWithDns(ns, 'primary', primary, { service: { name: 'web' } });
    await domainWithDns(other, 'theirs', theirs, { service: { name: 'web' } });
    await waitFor(`the HostnameClaim of ${theirs}`, () => getHostnameClaim(theirs));
    await waitForCondition(ns, 'primary', 'Ready', 'True', undefined, 120_000);
  }, 150_000);

  it('does not route a redirect whose target no CustomDomain of the project has, and names what serves', async () => {
    await domainWithDns(ns, 'missing', `missing.${ns}.example`, { redirect: { to: `typo.${ns}.example` } });
    const cd = await waitForCondition(ns, 'missing', 'Routed', 'False', 'RedirectTargetNotFound');
    expect(condition(cd, 'Routed')?.message).toContain(`Domains of this project that serve: ${primary}.`);
    expect(condition(cd, 'Ready')?.status).toBe('False');
  });

  it("does not route a redirect to another project's hostname, and does not name that project", async () => {
    await domainWithDns(ns, 'foreign', `foreign.${ns}.example`, { redirect: { to: theirs } });
    const cd = await waitForCondition(ns, 'foreign', 'Routed', 'False', 'RedirectTargetOtherProject');
    expect(condition(cd, 'Routed')?.message).toContain(`${theirs} is a domain of another project`);
    expect(condition(cd, 'Routed')?.message).not.toContain(other);
  });

  it('does not route the first hop of a chain (a → b → c); b, which goes straight to c, is routed', async () => {
    await domainWithDns(ns, 'chain-b', `b.${ns}.example`, { redirect: { to: primary } });
    await domainWithDns(ns, 'chain-a', `a.${ns}.example`, { redirect: { to: `b.${ns}.example` } });
    const a = await waitForCondition(ns, 'chain-a', 'Routed', 'False', 'RedirectChain');
    expect(condition(a, 'Routed')?.message).toContain(
      `Set redirect.to to ${primary}, which serves this project.`,
    );
    await waitForCondition(ns, 'chain-b', 'Routed', 'True');
  });

  it('routes neither domain of a loop (a → b → a)', async () => {
    await domainWithDns(ns, 'loop-a', `loop-a.${ns}.example`, { redirect: { to: `loop-b.${ns}.example` } });
    await domainWithDns(ns, 'loop-b', `loop-b.${ns}.example`, { redirect: { to: `loop-a.${ns}.example` } });
    await waitForCondition(ns, 'loop-a', 'Routed', 'False', 'RedirectLoop');
    await waitForCondition(ns, 'loop-b', 'Routed', 'False', 'RedirectLoop');
    // No challenge Service in the sandbox: a redirect that is not routed writes no Ingress.
    const names = await ingressNames(ns);
    for (const name of ['missing', 'foreign', 'chain-a', 'loop-a', 'loop-b'])
      expect(names).not.toContain(`portico-${name}`);
  });

  it('routes a redirect once its target becomes Ready (Routed once Contour took the Ingress)', async () => {
    const late = `late.${ns}.example`;
    await createCustomDomain(ns, 'late', { hostname: late, service: { name: 'web' } }); // no DNS yet
    await domainWithDns(ns, 'to-late', `to-late.${ns}.example`, { redirect: { to: late } });
    const waiting = await waitForCondition(ns, 'to-late', 'Routed', 'False', 'RedirectTargetNotServing');
    expect(condition(waiting, 'Routed')?.message).toContain(`${late} (CustomDomain late) does not serve yet`);

    await dns.setCname(late, sandbox.platformCnameTarget);
    await requestVerify(ns, 'late');
    await waitForCondition(ns, 'late', 'Ready', 'True', undefined, 120_000);
    const routed = await waitForCondition(ns, 'to-late', 'Routed', 'True', undefined, 30_000);
    expect(condition(routed, 'Routed')?.message).toContain(`301 Moved Permanently to https://${late}`);
    expect(condition(routed, 'Routed')?.message).toContain('Contour took Ingress portico-to-late');
    expect(await ingressNames(ns)).toContain('portico-to-late');
  }, 180_000);
});
