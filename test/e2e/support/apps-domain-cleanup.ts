/**
 * Clean-up for the files that run an operator with `--apps-domain` (project-subdomain,
 * apps-certificate): their Projects, swept by the operator, and what the apps domain leaves in the
 * operator's namespace.
 */
import { SUBDOMAIN_DELEGATION_NAME } from '../../../src/data-planes/contour/subdomain-route.js';
import { APPS_DOMAIN_SECRET } from '../../../src/controller/main.js';
import { OPERATOR_NAMESPACE } from '../../../src/sandbox/stack.js';
import { customDomainApi, kube, waitFor } from './cluster.js';

const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;
const proxyApi = { group: 'projectcontour.io', version: 'v1', plural: 'httpproxies' } as const;

/**
 * Deletes each Project and waits (60 s each at most) until the operator, which must still run, has
 * swept what it owned: its CustomDomains and the subdomain's HTTPProxy (no garbage collector runs
 * in the stack).
 */
export async function deleteProjects(
  projects: readonly { namespace: string; name: string }[],
): Promise<void> {
  for (const { namespace, name } of projects) {
    await kube()
      .custom.deleteNamespacedCustomObject({ ...projectApi, namespace, name })
      .catch(() => undefined);
    await waitFor(
      `${namespace}'s CustomDomains and subdomain HTTPProxy to be gone`,
      async () => {
        const cds = (await kube().custom.listNamespacedCustomObject({ ...customDomainApi, namespace })) as {
          items: unknown[];
        };
        const proxies = (await kube().custom.listNamespacedCustomObject({ ...proxyApi, namespace })) as {
          items: unknown[];
        };
        return cds.items.length === 0 && proxies.items.length === 0 ? true : undefined;
      },
      60_000,
    );
  }
}

/**
 * Deletes the wildcard Secret, the Secrets named in `secrets` (the file's ACME account Secrets) and
 * the TLSCertificateDelegation from the operator's namespace; absent ones are fine.
 */
export async function deleteAppsDomainObjects(secrets: readonly string[]): Promise<void> {
  for (const name of [...secrets, APPS_DOMAIN_SECRET])
    await kube()
      .core.deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name })
      .catch(() => undefined);
  await kube()
    .custom.deleteNamespacedCustomObject({
      group: 'projectcontour.io',
      version: 'v1',
      plural: 'tlscertificatedelegations',
      namespace: OPERATOR_NAMESPACE,
      name: SUBDOMAIN_DELEGATION_NAME,
    })
    .catch(() => undefined);
}
