/**
 * The compiled rate-limit config has no cluster-wide size ceiling (docs/ratelimits.md, "The
 * compiled config"), on the real stack: the sandbox's operator compiles the policies into several
 * ConfigMaps (shards) and the sandbox's `portico ratelimit-server` loads them all.
 *
 * - Policies whose compiled config is over 1 MiB in total (the API server's limit for one ConfigMap)
 *   are all Enforced, and another tenant's small policy created after them too.
 * - Override key ids over 384 KiB together are refused by the CRD; a policy that passes the CRD but
 *   compiles to more than the per-policy bound is refused by the operator (Accepted=False naming
 *   the bound), and another tenant's new policy is Enforced meanwhile.
 * - A shard deleted by hand is re-created by the operator, and the service keeps enforcing the last
 *   config it loaded meanwhile.
 * - A shard in the layout of the previous version (one indented document) is read, and a policy
 *   change rewrites only the shard that holds the policy.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitPolicySpec } from '../../src/api/ratelimitpolicy.js';
import { unique, waitFor } from './support/cluster.js';
import {
  check,
  clients,
  createNamespace,
  createPolicy,
  rateLimitClient,
  updatePolicy,
  waitForPolicyCondition,
} from './ratelimit-helpers.js';

const OPERATOR_NS = 'portico-system';
const CONFIG_NAME = 'portico-ratelimit-config';
const ONE_MIB = 1024 * 1024;

/** A policy with 1,000 overrides whose key ids have the CRD's longest length (256). */
function bigSpec(tag: string): RateLimitPolicySpec {
  return {
    plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
    defaultPlan: 'free',
    overrides: Array.from({ length: 1000 }, (_, i) => ({
      keyId: `${tag}-${i}-`.padEnd(256, 'x'),
      requestsPerMinute: i === 0 ? 4321 : 1000,
      requestsPerDay: 100000,
    })),
  };
}

const SMALL: RateLimitPolicySpec = {
  plans: [{ name: 'free', requestsPerMinute: 77, requestsPerDay: 1000 }],
  defaultPlan: 'free',
};

/** The config ConfigMaps the operator wrote. */
async function configMaps(): Promise<V1ConfigMap[]> {
  const list = await clients().core.listNamespacedConfigMap({
    namespace: OPERATOR_NS,
    labelSelector: 'app.kubernetes.io/component=ratelimit',
  });
  return list.items.filter((cm) => {
    const name = cm.metadata?.name ?? '';
    return name === CONFIG_NAME || /^portico-ratelimit-config-[0-9]+$/.test(name);
  });
}

/** The config ConfigMaps the operator wrote: name → text of config.json. */
async function configShards(): Promise<Map<string, string>> {
  return new Map((await configMaps()).map((cm) => [cm.metadata?.name ?? '', cm.data?.['config.json'] ?? '']));
}

/** The ConfigMap (namespace/name) the policy's Accepted message says it was compiled into. */
async function compiledInto(namespace: string, name: string): Promise<string> {
  const p = await waitForPolicyCondition(namespace, name, 'Accepted', 'True', 'Compiled');
  const message = p.status?.conditions?.find((c) => c.type === 'Accepted')?.message ?? '';
  const match = /ConfigMap ([^ ]+)/.exec(message);
  if (match?.[1] === undefined) throw new Error(`no ConfigMap in the Accepted message: ${message}`);
  return match[1];
}

const tenantA = unique('rl-big');
const tenantB = unique('rl-small');

beforeAll(async () => {
  await createNamespace(tenantA);
  await createNamespace(tenantB);
});

afterAll(() => {
  rateLimitClient().close();
});

describe('the compiled config over several ConfigMaps', () => {
  it('enforces policies whose config totals more than 1 MiB, and another tenant’s small policy after them', async () => {
    for (const n of [1, 2, 3, 4]) await createPolicy(tenantA, `big-${n}`, bigSpec(`k${n}`));
    await createPolicy(tenantB, 'small', SMALL);
    await waitForPolicyCondition(tenantB, 'small', 'Enforced', 'True', 'Loaded', 60_000);
    for (const n of [1, 2, 3, 4]) {
      await waitForPolicyCondition(tenantA, `big-${n}`, 'Enforced', 'True', 'Loaded', 60_000);
    }
    const shards = await configShards();
    const total = [...shards.values()].reduce((sum, text) => sum + Buffer.byteLength(text), 0);
    expect(total).toBeGreaterThan(ONE_MIB);
    expect(shards.size).toBeGreaterThan(1);
    for (const text of shards.values()) expect(Buffer.byteLength(text)).toBeLessThan(ONE_MIB);
    // The Accepted message names the ConfigMap that really holds the policy.
    for (const n of [1, 2, 3, 4]) {
      const where = await compiledInto(tenantA, `big-${n}`);
      const text = shards.get(where.slice(where.indexOf('/') + 1)) ?? '';
      expect(text).toContain(`"domain":"${tenantA}/big-${n}"`);
    }
    // The server enforces them: each policy's first override, and the small policy's plan.
    for (const n of [1, 2, 3, 4]) {
      const a = await check(`${tenantA}/big-${n}`, { key_id: `k${n}-0-`.padEnd(256, 'x') });
      expect(a.headers['X-RateLimit-Limit']).toBe('4321');
    }
    expect((await check(`${tenantB}/small`, { key_id: 'k' })).headers['X-RateLimit-Limit']).toBe('77');
  });

  it('refuses, in the CRD, override keyIds of more than 384 KiB together, saying why', async () => {
    // 600 key ids of 250 four-byte characters: within the CRD's 256 characters each, about 600 KB.
    const huge: RateLimitPolicySpec = {
      plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
      defaultPlan: 'free',
      overrides: Array.from({ length: 600 }, (_, i) => ({
        keyId: `${i}-${'\u{1F600}'.repeat(250)}`,
        requestsPerMinute: 10,
        requestsPerDay: 100,
      })),
    };
    const err = await createPolicy(tenantA, 'emoji', huge).then(
      () => 'created',
      (e: unknown) => (e as { body?: unknown }).body ?? e,
    );
    expect(String(err)).toContain(
      'the override keyIds take more than 393216 bytes (384 KiB) of UTF-8 together',
    );
  });

  it('refuses a policy over the per-policy bound, naming it, and enforces another tenant’s new policy meanwhile', async () => {
    // 1,000 key ids of 250 quotes: 254 KB of key ids (the CRD lets them pass), but JSON writes each
    // quote in two bytes: about 555 KB compiled.
    const huge: RateLimitPolicySpec = {
      plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
      defaultPlan: 'free',
      overrides: Array.from({ length: 1000 }, (_, i) => ({
        keyId: `${i}-${'"'.repeat(250)}`,
        requestsPerMinute: 10,
        requestsPerDay: 100,
      })),
    };
    await createPolicy(tenantA, 'huge', huge);
    await createPolicy(tenantB, 'second', SMALL);
    const refused = await waitForPolicyCondition(tenantA, 'huge', 'Accepted', 'False', 'InvalidSpec');
    const message = refused.status?.conditions?.find((c) => c.type === 'Accepted')?.message ?? '';
    expect(message).toMatch(/^the compiled policy is \d+ bytes; one policy may take at most 524288 bytes/);
    await waitForPolicyCondition(tenantA, 'huge', 'Enforced', 'False', 'NotAccepted');
    await waitForPolicyCondition(tenantB, 'second', 'Enforced', 'True', 'Loaded');
    expect((await check(`${tenantB}/second`, { key_id: 'k' })).headers['X-RateLimit-Limit']).toBe('77');
    expect((await check(`${tenantA}/huge`, { key_id: 'k' })).headers).toEqual({});
  });

  it('re-creates a shard deleted by hand, and the service enforces the last config meanwhile', async () => {
    const where = await compiledInto(tenantA, 'big-4');
    const shard = where.slice(where.indexOf('/') + 1);
    const domain = `${tenantA}/big-4`;
    const keyId = 'k4-0-'.padEnd(256, 'x');
    await clients().core.deleteNamespacedConfigMap({ namespace: OPERATOR_NS, name: shard });
    const limits: string[] = [];
    let repaired = false;
    const probing = (async (): Promise<void> => {
      while (!repaired) {
        limits.push((await check(domain, { key_id: keyId })).headers['X-RateLimit-Limit'] ?? 'none');
        await sleep(20);
      }
    })();
    try {
      await waitFor(
        `${shard} to be re-created with ${domain}`,
        async () => ((await configShards()).get(shard)?.includes(`"domain":"${domain}"`) ? true : undefined),
        30_000,
        100,
      );
    } finally {
      repaired = true;
      await probing;
    }
    expect(limits.length).toBeGreaterThan(0);
    expect(new Set(limits)).toEqual(new Set(['4321']));
    await waitForPolicyCondition(tenantA, 'big-4', 'Enforced', 'True', 'Loaded');
    expect((await check(domain, { key_id: keyId })).headers['X-RateLimit-Limit']).toBe('4321');
    expect((await check(`${tenantB}/small`, { key_id: 'k2' })).headers['X-RateLimit-Limit']).toBe('77');
  });

  it('reads a shard in the layout of the previous version, and a policy change rewrites only its shard', async () => {
    const where = await compiledInto(tenantB, 'small');
    const name = where.slice(where.indexOf('/') + 1);
    const before = await configMaps();
    const target = before.find((cm) => cm.metadata?.name === name);
    if (target === undefined) throw new Error(`${name} not found`);
    // What the previous version wrote: one document indented by one space.
    const old = JSON.stringify(JSON.parse(target.data?.['config.json'] ?? '{}'), null, 1);
    await clients().core.replaceNamespacedConfigMap({
      namespace: OPERATOR_NS,
      name,
      body: { ...target, data: { 'config.json': old } },
    });
    const versions = new Map(
      (await configMaps()).map((cm) => [cm.metadata?.name, cm.metadata?.resourceVersion]),
    );
    await updatePolicy(tenantB, 'small', {
      ...SMALL,
      plans: [{ name: 'free', requestsPerMinute: 88, requestsPerDay: 1000 }],
    });
    await waitForPolicyCondition(tenantB, 'small', 'Enforced', 'True', 'Loaded');
    expect(await compiledInto(tenantB, 'small')).toBe(where);
    const after = await configMaps();
    for (const cm of after) {
      const n = cm.metadata?.name;
      if (n === name) {
        expect(cm.metadata?.resourceVersion).not.toBe(versions.get(n));
        expect(cm.data?.['config.json']).toContain(`"domain":"${tenantB}/small"`);
        expect(cm.data?.['config.json']).toContain('"requestsPerMinute":88');
      } else {
        expect(cm.metadata?.resourceVersion, `${n} was not to be written`).toBe(versions.get(n));
      }
    }
    expect((await check(`${tenantB}/small`, { key_id: 'k3' })).headers['X-RateLimit-Limit']).toBe('88');
    for (const n of [1, 2, 3, 4]) {
      await waitForPolicyCondition(tenantA, `big-${n}`, 'Enforced', 'True', 'Loaded');
      const a = await check(`${tenantA}/big-${n}`, { key_id: `k${n}-0-`.padEnd(256, 'x') });
      expect(a.headers['X-RateLimit-Limit']).toBe('4321');
    }
  });
});
