/**
 * Two operator processes against one API server (issue: leader election): exactly one reconciles;
 * SIGKILL of the leader and the other takes over within the lease duration; each issuance gets one
 * ACME order. Both share the HTTP-01 port (SO_REUSEPORT), so the CA's validation requests reach
 * either process, as a Service spreads them over replicas: the shared challenge store is exercised.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  restartStackController,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
  runAll,
} from './support/stack-controller.js';

const LEASE_DURATION_SECONDS = 15;
const RETRY_PERIOD_SECONDS = 2;
let stack: ControllerCommand | undefined;
const replicas: OperatorProcess[] = [];

async function startReplica(name: string): Promise<OperatorProcess> {
  if (!stack) throw new Error('the stack operator was not found');
  const replica = await startOperator(stack, `failover-${name}`);
  replicas.push(replica);
  return replica;
}

async function logOf(replica: { log: string }): Promise<string> {
  return readFile(replica.log, 'utf8').catch(() => '');
}

/** How many orders all replicas created for `hostname` (their "ACME order created" lines). */
async function ordersFor(hostname: string): Promise<number> {
  const logs = await Promise.all(replicas.map(logOf));
  return logs
    .join('\n')
    .split('\n')
    .filter((l) => l.includes('"msg":"ACME order created"') && l.includes(`"hostname":"${hostname}"`)).length;
}

async function leaseHolder(): Promise<string | undefined> {
  const lease = await kube()
    .coordination.readNamespacedLease({ namespace: 'portico-system', name: 'portico-controller' })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity || undefined;
}

beforeAll(async () => {
  stack = await stopStackController();
});

afterAll(async () => {
  await runAll(...replicas.map((r) => () => stopOperator(r)), () => restartStackController(stack));
});

describe('two operator processes', () => {
  it('reconcile with one leader, fail over after SIGKILL within the lease duration, one order per issuance', async () => {
    const a = await startReplica('a');
    const b = await startReplica('b');
    await waitFor('a leader', async () => {
      const logs = await Promise.all([logOf(a), logOf(b)]);
      return logs.some((l) => l.includes('"msg":"became leader"')) ? true : undefined;
    });
    await new Promise((r) => setTimeout(r, RETRY_PERIOD_SECONDS * 1000 * 2));
    const leading = (await Promise.all([logOf(a), logOf(b)])).map((l) =>
      l.includes('"msg":"controller started"'),
    );
    expect(leading.filter(Boolean)).toHaveLength(1);
    const [leader, standby] = leading[0] ? [a, b] : [b, a];

    const ns = unique('failover');
    await createProject(ns);
    const first = `first.${ns}.example`;
    await dns.setCname(first, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'first', { hostname: first, service: { name: 'web' } });
    await waitForCondition(ns, 'first', 'Ready', 'True');
    expect(await logOf(standby)).not.toContain('"msg":"controller started"');

    const holderBefore = await leaseHolder();
    const killedAt = Date.now();
    leader.child.kill('SIGKILL');
    await waitFor(
      'the standby to take the lease',
      async () => {
        const holder = await leaseHolder();
        return holder && holder !== holderBefore ? holder : undefined;
      },
      (LEASE_DURATION_SECONDS + 10) * 1000,
    );
    const takeoverMs = Date.now() - killedAt;
    // The standby counts the lease duration from when it first saw the leader's last renewal (as
    // client-go does), which its polls (every retry period, +0-20 % jitter) see up to one poll late,
    // and takes the Lease at its first poll after that count ends: at most a lease duration and two
    // jittered retry periods after the kill, plus a second for the requests. A CI run took 19.0 s
    // against the former bound of one retry period (18.4 s).
    expect(takeoverMs).toBeLessThanOrEqual(
      (LEASE_DURATION_SECONDS + 2 * RETRY_PERIOD_SECONDS * 1.2 + 1) * 1000,
    );
    await waitFor('the standby to start reconciling', async () =>
      (await logOf(standby)).includes('"msg":"controller started"') ? true : undefined,
    );

    const second = `second.${ns}.example`;
    await dns.setCname(second, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'second', { hostname: second, service: { name: 'web' } });
    await waitForCondition(ns, 'second', 'Ready', 'True');
    // The new leader re-reads every domain and finds the first one's certificate: no second order.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await ordersFor(first)).toBe(1);
    expect(await ordersFor(second)).toBe(1);
  });
});
