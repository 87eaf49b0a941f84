/**
 * HTTP-01 key authorizations shared between replicas through the real API server: what one
 * replica publishes, another serves; what it withdraws, no replica serves.
 */
import { KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { CHALLENGE_CONFIGMAP, ConfigMapChallengeStore } from '../../src/acme/challenge-store.js';
import { kube, sandbox, unique, waitFor } from './support/cluster.js';

const stores: ConfigMapChallengeStore[] = [];

function replica(namespace: string): ConfigMapChallengeStore {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  const store = new ConfigMapChallengeStore(
    kc,
    KubernetesObjectApi.makeApiClient(kc),
    namespace,
    pino({ level: 'silent' }),
  );
  store.start();
  stores.push(store);
  return store;
}

afterAll(async () => {
  await Promise.all(stores.map((s) => s.stop()));
});

describe('challenge store across replicas', () => {
  it('serves on one replica what another published, and stops after withdraw', async () => {
    const ns = unique('http01');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const leader = replica(ns);
    const follower = replica(ns);
    const token = 'tok_0123456789abcdefghijKLMNOP';
    await leader.publish(token, `${token}.thumbprint`);
    expect(leader.get(token)).toBe(`${token}.thumbprint`);
    await waitFor('the follower to see the key authorization', () => follower.get(token), 10_000, 50);
    expect(follower.get(token)).toBe(`${token}.thumbprint`);

    await leader.publish('second_token_0123456789abcd', 'second');
    await leader.withdraw(token);
    // At once, whatever its own watch still shows of the ConfigMap.
    expect(leader.get(token)).toBeUndefined();
    await waitFor(
      'the follower to drop it',
      () => (follower.get(token) === undefined ? true : undefined),
      10_000,
      50,
    );
    await waitFor(
      'the follower to keep the other',
      () => follower.get('second_token_0123456789abcd'),
      10_000,
      50,
    );
    expect(leader.get(token)).toBeUndefined();
  });

  it('writes the changes made while a patch is in flight together: 40 orders cost a few writes, not 80', async () => {
    const ns = unique('http01-batch');
    await kube().core.createNamespace({ body: { metadata: { name: ns } } });
    const leader = replica(ns);
    const follower = replica(ns);
    await leader.publish('first_token_0123456789abcdef', 'first'); // creates the ConfigMap
    // Every write of the ConfigMap is one watch event (the API server sends each resourceVersion).
    const kc = new KubeConfig();
    kc.loadFromFile(sandbox.kubeconfig);
    let writes = 0;
    const watch = await new Watch(kc).watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      { fieldSelector: `metadata.name=${CHALLENGE_CONFIGMAP}` },
      (phase) => {
        if (phase === 'MODIFIED') writes += 1;
      },
      () => undefined,
    );
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
      await Promise.all(tokens.map((t) => leader.withdraw(t)));
      await waitFor(
        'the follower to drop all 40',
        () => (tokens.every((t) => follower.get(t) === undefined) ? true : undefined),
        10_000,
        50,
      );
      await waitFor('the watch to catch up', () => (writes >= 2 ? true : undefined), 5_000, 50);
      // One write per change would be 80; a group commit sends at most a few per burst.
      expect(writes).toBeGreaterThanOrEqual(2);
      expect(writes).toBeLessThanOrEqual(6);
      expect(follower.get('first_token_0123456789abcdef')).toBe('first');
    } finally {
      watch.abort();
    }
  });
});
