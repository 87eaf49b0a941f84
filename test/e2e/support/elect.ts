/**
 * A candidate process for the leader-election test: runs Portico's LeaderElector against the real
 * API server and prints `leading <identity>` / `stopped <identity>` lines.
 *
 *   node --import tsx test/e2e/support/elect.ts <kubeconfig> <namespace> <lease> <identity> [lease seconds]
 *
 * Prints `ready <identity>` once it has reached the API server, before it campaigns.
 */
import { KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LeaderElector } from '../../../src/kube/leader-election.js';

const [kubeconfig, namespace, name, identity, leaseSeconds = '4'] = process.argv.slice(2);
if (!kubeconfig || !namespace || !name || !identity)
  throw new Error('usage: elect.ts <kubeconfig> <namespace> <lease> <identity>');
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const objects = KubernetesObjectApi.makeApiClient(kc);
const leaseDurationSeconds = Number(leaseSeconds);
const elector = new LeaderElector(
  objects,
  {
    namespace,
    name,
    identity,
    leaseDurationSeconds,
    renewDeadlineSeconds: leaseDurationSeconds - 1,
    retryPeriodSeconds: 1,
  },
  pino({ level: process.env.ELECT_LOG_LEVEL ?? 'silent' }, pino.destination(2)),
);
// Reach the API server once (404 is fine) so a slow start is not mistaken for a slow election.
await objects
  .read({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace } })
  .catch(() => undefined);
process.stdout.write(`ready ${identity}\n`);
elector.run(
  () => process.stdout.write(`leading ${identity}\n`),
  () => process.stdout.write(`stopped ${identity}\n`),
);
process.once('SIGTERM', () => {
  void elector.stop().then(() => process.exit(0));
});
