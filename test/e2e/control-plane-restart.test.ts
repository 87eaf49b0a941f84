/**
 * The control plane restarts in the middle of an issuance (docs/reliability.md, "Custom domains:
 * faults of the parts Portico depends on"): the domain reaches Ready with one certificate (one
 * order, one finalize at the CA; one TLS Secret whose key is the certificate's), and nothing is
 * missed (a domain created after the restart is seen through the rebuilt watches). The order is
 * held at its challenge response by the fault proxy in front of the real Pebble; the stack's own
 * kube-apiserver or etcd is stopped (SIGTERM) while the order runs on, and started again on the
 * same data.
 */
import { describe, expect, it } from 'vitest';
import { ETCD } from '../../src/sandbox/etcd.js';
import { KUBE_APISERVER } from '../../src/sandbox/kube-apiserver.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  sandbox,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { startComponent, stopComponent, type RestartableComponent } from './support/components.js';
import { sleep, tlsSecrets, uniqueHostname, useProxiedOperator, within } from './support/proxied-operator.js';

const target = sandbox.platformCnameTarget;
/** How long the component stays down after the CA issued the certificate, ms. */
const DOWN_AFTER_ISSUE_MS = 5_000;

/**
 * Leader election that rides through the outage: a leader that cannot renew its Lease within the
 * renew deadline steps down and exits (default 10 s), and its supervisor's next process places a
 * new order, which operator-crash.test.ts covers. With etcd down the API server answers 504 only
 * after about 34 s, so the outage here (stop, the order's remaining steps, 5 s more) can pass 45 s
 * on a busy machine: a CI run saw the leader step down at its 45 s deadline, with the certificate
 * stored and no status written, and no operator left to write it. The deadline is 150 s.
 */
const LEADER_ELECTION = {
  '--leader-election-lease-duration-seconds': '180',
  '--leader-election-renew-deadline-seconds': '150',
};

const faults = useProxiedOperator('control-plane-restart', LEADER_ELECTION);

/**
 * Holds a new domain's order at its challenge response, stops `component`, lets the order run on
 * to the certificate download, keeps the component down a while longer, starts it again, and
 * checks the outcome.
 */
async function issuanceAcrossRestart(component: RestartableComponent, prefix: string): Promise<void> {
  const { ns, hostname } = uniqueHostname(prefix);
  await createProject(ns);
  await dns.setCname(hostname, target);
  const held = faults.proxy().hold((x) => x.kind === 'challenge-response' && x.hostnames.includes(hostname));
  await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
  await within('the challenge response to reach the proxy', held.arrived, 120_000);

  const stopped = await stopComponent(component);
  try {
    held.release();
    // The CA validates (the operator serves the key authorization it holds), the order is
    // finalized and the certificate downloaded while the component is down.
    await waitFor(
      'the certificate download',
      () => (faults.exchangesFor(hostname, 'certificate').some((x) => x.status === 200) ? true : undefined),
      60_000,
    );
    await sleep(DOWN_AFTER_ISSUE_MS);
  } finally {
    await startComponent(stopped);
  }

  const ready = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 150_000);
  // One certificate: one order, one finalize, one download at the CA.
  expect(faults.exchangesFor(hostname, 'new-order').map((x) => x.status)).toEqual([201]);
  expect(faults.exchangesFor(hostname, 'finalize').map((x) => x.status)).toEqual([200]);
  expect(faults.exchangesFor(hostname, 'certificate').map((x) => x.status)).toEqual([200]);
  const secrets = await tlsSecrets(ns);
  expect(secrets).toEqual([
    {
      name: 'www-tls',
      serialNumber: ready.status?.certificate?.serialNumber,
      dnsNames: [hostname],
      keyMatches: true,
    },
  ]);

  // Nothing missed: a domain created after the restart is seen (the watches were rebuilt) and
  // issued at once, well before any periodic re-list.
  const next = `next.${ns}.example`;
  await dns.setCname(next, target);
  await createCustomDomain(ns, 'next', { hostname: next, service: { name: 'web' } });
  await waitForCondition(ns, 'next', 'Ready', 'True', undefined, 60_000);
  expect(faults.exchangesFor(next, 'new-order').map((x) => x.status)).toEqual([201]);
  // And the first domain stays as it was.
  expect((await getCustomDomain(ns, 'www')).status?.certificate?.serialNumber).toBe(
    ready.status?.certificate?.serialNumber,
  );
}

describe('kube-apiserver restart in the middle of an issuance', () => {
  it('reaches Ready with one certificate, and misses nothing', async () => {
    await issuanceAcrossRestart(KUBE_APISERVER, 'apiserver-restart');
  }, 400_000);
});

describe('etcd restart in the middle of an issuance', () => {
  it('reaches Ready with one certificate, and misses nothing', async () => {
    await issuanceAcrossRestart(ETCD, 'etcd-restart');
  }, 400_000);
});
