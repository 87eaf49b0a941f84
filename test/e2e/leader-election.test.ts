/**
 * Leader election between real processes on the real API server: exactly one of two candidates
 * leads; SIGKILL of the leader and the other takes over within the lease duration; a SIGTERM'd
 * leader releases the Lease so the next one takes over at once; a holder whose clock lags (its
 * renewTime far in the past) keeps the Lease while it renews, and loses it a lease duration after
 * its last renewal as the candidate observed it.
 */
import { KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { microTime } from '../../src/kube/leader-election.js';
import { kube, sandbox, unique, waitFor } from './support/cluster.js';

const LEASE_SECONDS = 4;
const children: ChildProcess[] = [];

function candidate(
  namespace: string,
  identity: string,
  leaseSeconds = LEASE_SECONDS,
): { child: ChildProcess; lines: string[] } {
  // One process per candidate (node with tsx's loader), so a signal reaches the elector itself.
  const script = resolve('test/e2e/support/elect.ts');
  const args = [
    '--import',
    'tsx',
    script,
    sandbox.kubeconfig,
    namespace,
    'portico-controller',
    identity,
    String(leaseSeconds),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => lines.push(...chunk.split('\n').filter(Boolean)));
  children.push(child);
  return { child, lines };
}

async function ready(...candidates: { lines: string[] }[]): Promise<void> {
  await waitFor(
    'the candidates to reach the API server',
    () => (candidates.every((c) => c.lines.some((l) => l.startsWith('ready'))) ? true : undefined),
    60_000,
    100,
  );
}

async function holder(namespace: string): Promise<string | undefined> {
  const lease = await kube()
    .coordination.readNamespacedLease({ namespace, name: 'portico-controller' })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity || undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Lease extends KubernetesObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/**
 * Another holder of the Lease `portico-controller` in `namespace` whose clock is `skewMs` behind:
 * it creates the Lease, then renews it every second (renewTime = its own clock) until `stop`, which
 * resolves to the time (this process's clock, ms) its last renewal was written. It stops renewing
 * by itself once the Lease names someone else, as a real holder that lost the Lease would.
 */
async function skewedHolder(
  namespace: string,
  identity: string,
  leaseSeconds: number,
  skewMs: number,
): Promise<{ stop: () => Promise<number> }> {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const header = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'portico-controller', namespace },
  };
  const skewedNow = (): string => microTime(new Date(Date.now() - skewMs));
  const acquireTime = skewedNow();
  const spec = (): NonNullable<Lease['spec']> => ({
    holderIdentity: identity,
    leaseDurationSeconds: leaseSeconds,
    acquireTime,
    renewTime: skewedNow(),
    leaseTransitions: 0,
  });
  await objects.create({ ...header, spec: spec() });
  let lastRenewal = Date.now();
  let renewing = true;
  const loop = (async (): Promise<void> => {
    for (;;) {
      await sleep(1_000);
      if (!renewing) return;
      const current = await objects.read<Lease>(header);
      if (current.spec?.holderIdentity !== identity) return;
      try {
        await objects.replace<Lease>({
          ...header,
          metadata: current.metadata ?? header.metadata,
          spec: spec(),
        });
        lastRenewal = Date.now();
      } catch (err) {
        // A conflict: someone wrote the Lease since the read; the next read says who holds it.
        if ((err as { code?: number }).code !== 409) throw err;
      }
    }
  })();
  // Settled here so a failed renewal is reported by `stop`, not as an unhandled rejection.
  const settled = loop.then(
    () => undefined,
    (err: unknown) => (err instanceof Error ? err : new Error('renewal failed', { cause: err })),
  );
  return {
    stop: async () => {
      renewing = false;
      const err = await settled;
      if (err) throw err;
      return lastRenewal;
    },
  };
}

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('leader election', () => {
  it('elects one of two, and fails over within the lease duration after SIGKILL', async () => {
    const ns = unique('lease');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const a = candidate(ns, 'a');
    const b = candidate(ns, 'b');
    await ready(a, b);
    const first = await waitFor('a leader', () => holder(ns), 20_000, 100);
    await new Promise((r) => setTimeout(r, 2_500));
    const leading = [...a.lines, ...b.lines].filter((l) => l.startsWith('leading'));
    expect(leading).toEqual([`leading ${first}`]);

    const [leader, standby] = first === 'a' ? [a, b] : [b, a];
    const killedAt = Date.now();
    leader.child.kill('SIGKILL');
    const second = await waitFor(
      'the standby to take over',
      async () => ((await holder(ns)) !== first ? holder(ns) : undefined),
      15_000,
      100,
    ).catch(async (err: unknown) => {
      throw new Error(
        `${String(err)}; holder ${await holder(ns)}; a: ${a.lines.join(',')} (exit ${a.child.exitCode}); b: ${b.lines.join(',')} (exit ${b.child.exitCode}, signal ${b.child.signalCode})`,
      );
    });
    const takeoverMs = Date.now() - killedAt;
    expect(second).not.toBe(first);
    await waitFor(
      'the standby to report leading',
      () => (standby.lines.some((l) => l.startsWith('leading')) ? true : undefined),
      5_000,
      100,
    );
    // The lease must run out first (4 s), then the standby's next try (1 s retry, +20 % jitter).
    expect(takeoverMs).toBeGreaterThanOrEqual(LEASE_SECONDS * 1000 - 1_500);
    expect(takeoverMs).toBeLessThan((LEASE_SECONDS + 3) * 1000);
  });

  it('hands over well before the lease runs out when the leader stops with SIGTERM (the Lease is released)', async () => {
    const ns = unique('release');
    const leaseSeconds = 30;
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const a = candidate(ns, 'a', leaseSeconds);
    await ready(a);
    await waitFor('a to lead', async () => ((await holder(ns)) === 'a' ? true : undefined), 20_000, 100);
    const b = candidate(ns, 'b', leaseSeconds);
    await ready(b);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await holder(ns)).toBe('a');
    const stoppedAt = Date.now();
    a.child.kill('SIGTERM');
    await waitFor('b to lead', async () => ((await holder(ns)) === 'b' ? true : undefined), 25_000, 100);
    expect(Date.now() - stoppedAt).toBeLessThan((leaseSeconds * 1000) / 3);
    // The Lease says b; b's own line arrives through its stdout pipe a moment later.
    await waitFor('b to report leading', () => (b.lines.includes('leading b') ? true : undefined), 5_000, 50);
  });

  it('keeps off a Lease renewed by a holder whose clock lags an hour, and takes it a lease duration after the renewals stop', async () => {
    const ns = unique('skew');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    // The holder writes renewTime an hour in the past: judged by renewTime, the Lease looks long
    // expired; judged by what the candidate observes, it changes every second.
    const other = await skewedHolder(ns, 'skewed', LEASE_SECONDS, 3_600_000);
    let lastRenewal: number | undefined;
    try {
      const a = candidate(ns, 'a');
      await ready(a);
      const watchUntil = Date.now() + LEASE_SECONDS * 3 * 1000;
      while (Date.now() < watchUntil) {
        expect(await holder(ns)).toBe('skewed');
        await sleep(250);
      }
      expect(a.lines.filter((l) => l.startsWith('leading'))).toEqual([]);

      lastRenewal = await other.stop();
      await waitFor(
        'a to take the Lease',
        async () => ((await holder(ns)) === 'a' ? true : undefined),
        15_000,
        50,
      );
      const takeoverMs = Date.now() - lastRenewal;
      // Not before a lease duration after the last renewal the candidate could have seen; then
      // within its observation delay plus one try (1 s retry, +20 % jitter each).
      expect(takeoverMs).toBeGreaterThanOrEqual(LEASE_SECONDS * 1000 - 250);
      expect(takeoverMs).toBeLessThan((LEASE_SECONDS + 3) * 1000);
      await waitFor(
        'a to report leading',
        () => (a.lines.includes('leading a') ? true : undefined),
        5_000,
        50,
      );
    } finally {
      // Only when the test already failed: a renewal error would hide that failure.
      if (lastRenewal === undefined) await other.stop().catch(() => undefined);
    }
  });
});
