/**
 * HTTP-01 key authorizations shared between replicas through the real API server: what one
 * replica publishes, another serves; what it withdraws, no replica serves.
 */
import { KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigMapChallengeStore } from '../../src/acme/challenge-store.js';
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
});
