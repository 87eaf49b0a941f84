/**
 * Owned names (docs/routing.md, "Modes and flavors"; docs/reliability.md): the objects two
 * CustomDomains own can never collide, and no reconcile deletes or overwrites an object another
 * domain owns. A redirect domain `col` (whose challenge-only Ingress was once named
 * `portico-col-acme`) beside a serving domain `col-acme` (whose Ingress is `portico-col-acme`), run
 * by an operator with a challenge Service configured so the challenge Ingress exists (the sandbox
 * has no ingress controller: the test reads the stored objects).
 */
import type { V1Ingress } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUSTOM_DOMAIN_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  kube,
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

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'owned-names', {
    '--http01-service': 'portico-controller.portico-system.svc.cluster.local:8089',
  });
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

async function ingress(namespace: string, name: string): Promise<V1Ingress | undefined> {
  try {
    return await kube().networking.readNamespacedIngress({ namespace, name });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

describe('owned object names', () => {
  it('a redirect domain and a domain named after its old challenge Ingress live side by side', async () => {
    const ns = unique('names');
    const [redirecting, serving] = [`old.${ns}.example`, `www.${ns}.example`];
    await createProject(ns);
    await dns.setCname(redirecting, sandbox.platformCnameTarget);
    await dns.setCname(serving, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'col', { hostname: redirecting, redirect: { to: serving } });
    await createCustomDomain(ns, 'col-acme', { hostname: serving, service: { name: 'web' } });
    await waitForCondition(ns, 'col', 'Ready', 'True', undefined, 120_000);
    await waitForCondition(ns, 'col-acme', 'Ready', 'True', undefined, 120_000);

    const served = await ingress(ns, 'portico-col-acme');
    const challenge = await ingress(ns, 'portico--acme-col');
    expect(served?.metadata?.labels?.[CUSTOM_DOMAIN_LABEL]).toBe('col-acme');
    expect(served?.spec?.rules?.[0]?.host).toBe(serving);
    expect(challenge?.metadata?.labels?.[CUSTOM_DOMAIN_LABEL]).toBe('col');
    expect(challenge?.spec?.rules?.[0]?.host).toBe(redirecting);

    // Reconcile `col` over and over: nothing of `col-acme` is deleted or written again.
    for (let i = 0; i < 5; i += 1) {
      const requested = new Date(Date.now() + i).toISOString();
      await requestVerify(ns, 'col', requested);
      await waitFor(`verify ${i} of col answered`, async () =>
        (await getCustomDomain(ns, 'col')).status?.lastVerifyRequest === requested ? true : undefined,
      );
    }
    const after = await ingress(ns, 'portico-col-acme');
    expect(after?.metadata?.uid).toBe(served?.metadata?.uid);
    expect(after?.metadata?.resourceVersion).toBe(served?.metadata?.resourceVersion);
    expect((await ingress(ns, 'portico--acme-col'))?.metadata?.uid).toBe(challenge?.metadata?.uid);
  });

  it('does not overwrite an Ingress another domain owns, and says so', async () => {
    const ns = unique('taken');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    // An Ingress at the name domain `www` would use, labelled as CustomDomain `other`'s.
    await kube().networking.createNamespacedIngress({
      namespace: ns,
      body: {
        metadata: {
          name: 'portico-www',
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [CUSTOM_DOMAIN_LABEL]: 'other' },
        },
        spec: { defaultBackend: { service: { name: 'web', port: { number: 80 } } } },
      },
    });
    const before = await ingress(ns, 'portico-www');
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'www', 'Routed', 'False', 'NameInUse', 120_000);
    expect(cd.status?.conditions?.find((c) => c.type === 'Routed')?.message).toContain(
      'Ingress portico-www (CustomDomain other) belongs to another CustomDomain',
    );
    const after = await ingress(ns, 'portico-www');
    expect(after?.metadata?.resourceVersion).toBe(before?.metadata?.resourceVersion);
    expect(after?.spec?.rules).toBeUndefined();
  });
});
