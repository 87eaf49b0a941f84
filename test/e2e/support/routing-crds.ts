/**
 * The routing CRDs (Gateway API standard channel, Traefik) on the e2e stack's API server: fetched
 * from the Go module proxy by scripts/fetch-routing-crds.sh (no copies in the repository) and applied
 * with server-side apply. An operator started after this watches HTTPRoutes and ListenerSets (it
 * probes the optional kinds at start).
 */
import {
  ApiextensionsV1Api,
  KubeConfig,
  KubernetesObjectApi,
  loadAllYaml,
  PatchStrategy,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { FIELD_MANAGER } from '../../../src/api/customdomain.js';
import { sandbox, waitFor } from './cluster.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/fetch-routing-crds.sh', import.meta.url));

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return kc;
}

/**
 * Applies every CRD the script fetched and resolves with their names once all are Established.
 * Throws when the script fails (it needs `go`, and the module proxy or Go's module cache).
 */
export async function installRoutingCrds(): Promise<string[]> {
  const { stdout } = await promisify(execFile)('bash', [SCRIPT], { timeout: 300_000 });
  const files = stdout.split('\n').filter(Boolean);
  // A fresh client: KubernetesObjectApi caches API discovery.
  const objects = KubernetesObjectApi.makeApiClient(kubeConfig());
  const names: string[] = [];
  for (const file of files) {
    // loadAllYaml deserializes into the client's models: KubernetesObjectApi serializes a known kind
    // through its model, which would drop JSON names it does not map (x-kubernetes-int-or-string).
    for (const doc of loadAllYaml(await readFile(file, 'utf8'))) {
      const crd = doc as KubernetesObject | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      await objects.patch(crd, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
      names.push(crd.metadata?.name ?? '');
    }
  }
  const ext = kubeConfig().makeApiClient(ApiextensionsV1Api);
  for (const name of names) {
    await waitFor(`CRD ${name} Established`, async () => {
      const crd = await ext.readCustomResourceDefinition({ name });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
        ? true
        : undefined;
    });
  }
  return names;
}
