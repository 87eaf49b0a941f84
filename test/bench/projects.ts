/**
 * The projects the benchmarks publish domains for: a namespace on the Pro plan with Service `web`
 * (port 80) and an EndpointSlice with one ready endpoint (nothing else writes EndpointSlices in the
 * sandbox, which runs no controller-manager), as examples/ has it.
 */
import type { CoreV1Api, DiscoveryV1Api, V1EndpointSlice } from '@kubernetes/client-node';
import { PLAN_LABEL } from '../../src/api/customdomain.js';

/**
 * Creates namespace `ns` (labelled with the Pro plan and `labels`), its Service `web` and a ready
 * EndpointSlice for it. Rejects with the API server's error (e.g. 409 when `ns` exists).
 */
export async function createProject(
  cluster: { core: CoreV1Api; discovery: DiscoveryV1Api },
  ns: string,
  labels: Record<string, string> = {},
): Promise<void> {
  await cluster.core.createNamespace({
    body: { metadata: { name: ns, labels: { [PLAN_LABEL]: 'pro', ...labels } } },
  });
  await cluster.core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: 'web' }, spec: { ports: [{ port: 80, protocol: 'TCP' }] } },
  });
  const slice: V1EndpointSlice = {
    metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.1.0.1'], conditions: { ready: true } }],
    ports: [{ port: 80, protocol: 'TCP' }],
  };
  await cluster.discovery.createNamespacedEndpointSlice({ namespace: ns, body: slice });
}
