/**
 * Informer lists read page by page against the real API server (src/kube/informer.ts,
 * `collectionLister`): every object of a kind arrives however many pages it takes, for a built-in
 * kind (ConfigMap) and for a custom resource (HostnameClaim), as the plain JSON a watch event
 * carries (timestamps as strings, not the Date objects of client-node's typed lists).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { collectionLister, collectionPath, listInPages, type ListPage } from '../../src/kube/informer.js';
import { API_VERSION } from '../../src/api/customdomain.js';
import { HOSTNAME_CLAIM_PLURAL } from '../../src/api/hostnameclaim.js';
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

  it('reads every ConfigMap over three pages, as plain JSON', async () => {
    const lister = collectionLister(kubeConfig(), collectionPath('v1', 'configmaps'), selector);
    const { names, pages } = await readAll(lister);
    expect(names).toHaveLength(OBJECTS);
    expect(pages.map((p) => p.limit)).toEqual([PAGE_SIZE, PAGE_SIZE, PAGE_SIZE]);
    expect(pages[0]?.continue).toBeUndefined();
    expect(pages[1]?.continue).toBeTruthy();
    const [first] = (await lister({ limit: 1 })).items;
    expect(typeof first?.metadata?.creationTimestamp).toBe('string');
    expect(Object.getPrototypeOf(first)).toBe(Object.prototype);
  });

  it('reads every HostnameClaim over three pages', async () => {
    const lister = collectionLister(
      kubeConfig(),
      collectionPath(API_VERSION, HOSTNAME_CLAIM_PLURAL),
      selector,
    );
    const { names, pages } = await readAll(lister);
    expect(names).toEqual([...claimNames].sort());
    expect(pages).toHaveLength(3);
  });

  it('rejects with the status code of an error answer (404 for a kind the API server does not serve)', async () => {
    const lister = collectionLister(kubeConfig(), collectionPath('portico.dev/v1alpha1', 'nosuchkinds'));
    await expect(lister({ limit: 1 })).rejects.toMatchObject({ code: 404 });
  });
});
