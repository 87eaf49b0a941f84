/**
 * Informer lists read page by page against the real API server (src/kube/informer.ts): every object
 * of a kind arrives however many pages it takes, for a built-in kind (ConfigMap) and for a custom
 * resource (HostnameClaim), whose continue token client-node's generic list drops.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { clusterLister, listInPages, type ListPage } from '../../src/kube/informer.js';
import { API_VERSION } from '../../src/api/customdomain.js';
import { HOSTNAME_CLAIM_KIND, HOSTNAME_CLAIM_PLURAL } from '../../src/api/hostnameclaim.js';
import { hostnameClaim, hostnameClaimApi, kube, sandbox, unique } from './support/cluster.js';

const OBJECTS = 7;
const PAGE_SIZE = 3;
const run = unique('pages');
const selector = `portico.dev/test-run=${run}`;
const claimNames = Array.from({ length: OBJECTS }, (_, i) => `c${String(i)}.${run}.example`);

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return kc;
}

/** Reads every page of `list` (PAGE_SIZE objects a page); returns the objects and the pages asked for. */
async function readAll(
  list: (page: ListPage) => Promise<{ items: KubernetesObject[] }>,
): Promise<{ names: string[]; pages: ListPage[] }> {
  const pages: ListPage[] = [];
  const result = await listInPages(
    async (page) => {
      pages.push(page);
      return await list(page);
    },
    () => undefined,
    () => undefined,
    PAGE_SIZE,
  );
  return { names: result.items.map((o) => o.metadata?.name ?? '').sort(), pages };
}

describe('informer lists in pages', () => {
  beforeAll(async () => {
    const { core, custom } = kube();
    await core.createNamespace({ body: { metadata: { name: run } } });
    for (let i = 0; i < OBJECTS; i += 1) {
      await core.createNamespacedConfigMap({
        namespace: run,
        body: { metadata: { name: `cm${String(i)}`, labels: { 'portico.dev/test-run': run } } },
      });
    }
    for (const name of claimNames) {
      const claim = hostnameClaim(name, { namespace: run, name: 'none', uid: 'none' });
      claim.metadata.labels = { 'portico.dev/test-run': run };
      await custom.createClusterCustomObject({ ...hostnameClaimApi, body: claim });
    }
  });

  afterAll(async () => {
    const { core, custom } = kube();
    for (const name of claimNames)
      await custom.deleteClusterCustomObject({ ...hostnameClaimApi, name }).catch(() => undefined);
    await core.deleteNamespace({ name: run }).catch(() => undefined);
  });

  it('reads every ConfigMap over three pages', async () => {
    const lister = clusterLister(kubeConfig(), {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      labelSelector: selector,
    });
    const { names, pages } = await readAll(lister);
    expect(names).toHaveLength(OBJECTS);
    expect(pages.map((p) => p.limit)).toEqual([PAGE_SIZE, PAGE_SIZE, PAGE_SIZE]);
    expect(pages[0]?.continue).toBeUndefined();
    expect(pages[1]?.continue).toBeTruthy();
  });

  it('reads every HostnameClaim over three pages through the custom objects API', async () => {
    const lister = clusterLister(kubeConfig(), {
      apiVersion: API_VERSION,
      kind: HOSTNAME_CLAIM_KIND,
      plural: HOSTNAME_CLAIM_PLURAL,
      labelSelector: selector,
    });
    const { names, pages } = await readAll(lister);
    expect(names).toEqual([...claimNames].sort());
    expect(pages).toHaveLength(3);
  });

  it('would stop after the first page of a custom resource without its plural (why ListedKind has one)', async () => {
    const lister = clusterLister(kubeConfig(), {
      apiVersion: API_VERSION,
      kind: HOSTNAME_CLAIM_KIND,
      labelSelector: selector,
    });
    const { names, pages } = await readAll(lister);
    expect(pages).toHaveLength(1);
    expect(names).toHaveLength(PAGE_SIZE);
  });
});
