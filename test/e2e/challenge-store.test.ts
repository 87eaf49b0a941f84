/**
 * HTTP-01 key authorizations shared between replicas through the real API server: what one
 * replica publishes, another serves; what it withdraws, no replica serves once the withdrawal is
 * written (with the next publication, after the delay, or at stop).
 */
import { KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CHALLENGE_CONFIGMAP,
  ConfigMapChallengeStore,
  type ConfigMapChallengeStoreOptions,
} from '../../src/acme/challenge-store.js';
import { kube, sandbox, unique, waitFor } from './support/cluster.js';

const stores: ConfigMapChallengeStore[] = [];

function replica(namespace: string, options: ConfigMapChallengeStoreOptions = {}): ConfigMapChallengeStore {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  const store = new ConfigMapChallengeStore(
    kc,
    KubernetesObjectApi.makeApiClient(kc),
    namespace,
    pino({ level: 'silent' }),
    options,
  );
  store.start();
  stores.push(store);
  return store;
}

/** Each write of the challenge ConfigMap in `namespace`, as its watch delivers it (one per write). */
async function watchWrites(
  namespace: string,
): Promise<{ writes: Record<string, string>[]; stop: () => void }> {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  const writes: Record<string, string>[] = [];
  const watch = await new Watch(kc).watch(
    `/api/v1/namespaces/${namespace}/configmaps`,
    { fieldSelector: `metadata.name=${CHALLENGE_CONFIGMAP}` },
    (phase, obj: { data?: Record<string, string> }) => {
      if (phase === 'MODIFIED') writes.push(obj.data ?? {});
    },
    () => undefined,
  );
  return {
    writes,
    stop: () => {
      watch.abort();
    },
  };
}

afterAll(async () => {
  await Promise.all(stores.map((s) => s.stop()));
});

describe('challenge store across replicas', () => {
  it('serves on one replica what another published; a withdrawal stops it here at once and everywhere with the next publication', async () => {
    const ns = unique('http01');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const leader = replica(ns);
    const follower = replica(ns);
    const token = 'tok_0123456789abcdefghijKLMNOP';
    await leader.publish(token, `${token}.thumbprint`);
    expect(leader.get(token)).toBe(`${token}.thumbprint`);
    await waitFor('the follower to see the key authorization', () => follower.get(token), 10_000, 50);
    expect(follower.get(token)).toBe(`${token}.thumbprint`);

    const watched = await watchWrites(ns);
    try {
      await leader.withdraw(token);
      // At once, whatever its own watch still shows of the ConfigMap.
      expect(leader.get(token)).toBeUndefined();
      await leader.publish('second_token_0123456789abcd', 'second');
      await waitFor(
        'the follower to drop it',
        () => (follower.get(token) === undefined ? true : undefined),
        5_000, // well under the 10-s withdrawal delay: the publication carried it
        50,
      );
      expect(follower.get('second_token_0123456789abcd')).toBe('second');
      await waitFor(
        'the watch to see the write',
        () => (watched.writes.length >= 1 ? true : undefined),
        5_000,
        50,
      );
      // One write both published the second key authorization and dropped the first.
      expect(watched.writes).toHaveLength(1);
      expect(watched.writes[0]).toEqual({ second_token_0123456789abcd: 'second' });
      expect(leader.get(token)).toBeUndefined();
    } finally {
      watched.stop();
    }
  });

  it('writes a withdrawal on its own after the delay when no publication comes, at once when asked, and the waiting ones at stop', async () => {
    const ns = unique('http01-delay');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const leader = replica(ns, { withdrawDelayMs: 1_000 });
    const follower = replica(ns);
    await leader.publish('alone_token_0123456789abcdef', 'alone');
    await waitFor('the follower to see it', () => follower.get('alone_token_0123456789abcdef'), 10_000, 50);
    const withdrawnAt = Date.now();
    await leader.withdraw('alone_token_0123456789abcdef');
    await waitFor(
      'the follower to drop it',
      () => (follower.get('alone_token_0123456789abcdef') === undefined ? true : undefined),
      10_000,
      50,
    );
    // Not before the delay: the withdrawal waited for a publication that did not come.
    expect(Date.now() - withdrawnAt).toBeGreaterThanOrEqual(1_000);

    // writeNow (a cancelled order): written before it resolves.
    await leader.publish('now_token_0123456789abcdefgh', 'now');
    await leader.withdraw('now_token_0123456789abcdefgh', { writeNow: true });
    const read = await kube().core.readNamespacedConfigMap({ name: CHALLENGE_CONFIGMAP, namespace: ns });
    expect(read.data?.['now_token_0123456789abcdefgh']).toBeUndefined();

    // A replica that stops writes what it still holds back (a 10-s delay here).
    const stopping = replica(ns);
    await stopping.publish('stop_token_0123456789abcdef', 'stop');
    await waitFor('the follower to see it', () => follower.get('stop_token_0123456789abcdef'), 10_000, 50);
    await stopping.withdraw('stop_token_0123456789abcdef');
    const stoppedAt = Date.now();
    await stopping.stop();
    const cm = await kube().core.readNamespacedConfigMap({ name: CHALLENGE_CONFIGMAP, namespace: ns });
    expect(cm.data?.['stop_token_0123456789abcdef']).toBeUndefined();
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
  });

  it("drops with its next publication the tokens a previous leader left in the ConfigMap (a crash's)", async () => {
    const ns = unique('http01-stale');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    // What a leader killed mid-order leaves: its key authorizations, with nobody to withdraw them.
    const crashed = replica(ns);
    await crashed.publish('left_token_0123456789abcdefgh', 'left');
    const leader = replica(ns);
    await waitFor('the new leader to see it', () => leader.get('left_token_0123456789abcdefgh'), 10_000, 50);
    await leader.publish('new_token_0123456789abcdefghi', 'new');
    const cm = await kube().core.readNamespacedConfigMap({ name: CHALLENGE_CONFIGMAP, namespace: ns });
    expect(cm.data).toEqual({ new_token_0123456789abcdefghi: 'new' });
  });

  it('writes the changes made while a patch is in flight together: 40 orders cost a few writes, not 80', async () => {
    const ns = unique('http01-batch');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const leader = replica(ns, { withdrawDelayMs: 500 });
    const follower = replica(ns);
    await leader.publish('first_token_0123456789abcdef', 'first'); // creates the ConfigMap
    // Every write of the ConfigMap is one watch event (the API server sends each resourceVersion).
    const watched = await watchWrites(ns);
    try {
      const tokens = Array.from(
        { length: 40 },
        (_, i) => `batch_token_${String(i).padStart(2, '0')}_0123456789`,
      );
      await Promise.all(tokens.map((t) => leader.publish(t, `${t}.thumbprint`)));
      await waitFor(
        'the follower to see all 40',
        () => (tokens.every((t) => follower.get(t)) ? true : undefined),
        10_000,
        50,
      );
      await waitFor(
        'the watch to catch up',
        () => (watched.writes.length >= 2 ? true : undefined),
        5_000,
        50,
      );
      const publishes = watched.writes.length;
      // One write per change would be 40; a group commit sends at most a few per burst.
      expect(publishes).toBeGreaterThanOrEqual(2);
      expect(publishes).toBeLessThanOrEqual(5);
      await Promise.all(tokens.map((t) => leader.withdraw(t)));
      await waitFor(
        'the follower to drop all 40',
        () => (tokens.every((t) => follower.get(t) === undefined) ? true : undefined),
        10_000,
        50,
      );
      // The 40 withdrawals waited the delay together: one write.
      await new Promise((r) => setTimeout(r, 300));
      expect(watched.writes.length - publishes).toBe(1);
      expect(follower.get('first_token_0123456789abcdef')).toBe('first');
    } finally {
      watched.stop();
    }
  });
});
