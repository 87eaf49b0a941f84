/**
 * Headers on every answer (docs/ratelimits.md, "The answer"), on the real stack: the sandbox's
 * operator compiles the policies and its `portico ratelimit-server` answers envoyproxy/ratelimit's
 * own client (`client_cmd`) over real gRPC, counting in the real Redis.
 *
 * - A descriptor without `key_id` is never unlimited: by default it is limited by `remote_address`
 *   (what Envoy's `remote_address` action sends), on counters of its own; without that entry, or
 *   with `missingKeyId: Refuse`, it is refused with the headers (`X-RateLimit-Limit: 0`).
 * - The plan entry is matched without regard to case.
 * - The CRD refuses a `missingKeyId` it does not know, with the rule's message.
 *
 * Redis down (local counts) is in ratelimit-resilience.test.ts, a stalled Redis in
 * ratelimit-requests.test.ts: both need a server and a Redis of their own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitPolicySpec } from '../../src/api/ratelimitpolicy.js';
import { unique } from './support/cluster.js';
import {
  clients,
  createNamespace,
  createPolicy,
  envoyClientCheck,
  freshMinute,
  rateLimitClient,
  waitForPolicyCondition,
  windowEnds,
} from './ratelimit-helpers.js';

const ns = unique('rl-hdr');
const SPEC: RateLimitPolicySpec = {
  plans: [
    { name: 'free', requestsPerMinute: 3, requestsPerDay: 1000 },
    { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
  ],
  defaultPlan: 'free',
};

beforeAll(async () => {
  await createNamespace(ns);
  await createPolicy(ns, 'by-address', SPEC);
  await createPolicy(ns, 'refusing', { ...SPEC, missingKeyId: 'Refuse' });
  await waitForPolicyCondition(ns, 'by-address', 'Enforced', 'True', 'Loaded');
  await waitForPolicyCondition(ns, 'refusing', 'Enforced', 'True', 'Loaded');
});

afterAll(() => {
  rateLimitClient().close();
});

describe('a check without key_id', () => {
  it('is limited by remote_address with the default plan, apart from a key id of the same text', async () => {
    await freshMinute(5);
    const domain = `${ns}/by-address`;
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await envoyClientCheck(domain, 'remote_address=192.0.2.7'));
    expect(answers.map((a) => a.code)).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
    expect(answers.map((a) => a.headers['X-RateLimit-Remaining'])).toEqual(['2', '1', '0', '0']);
    expect(answers[3]?.headers).toMatchObject({
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Reset': String(windowEnds().minute),
    });
    expect(Number(answers[3]?.headers['Retry-After'])).toBeGreaterThan(0);
    // Another address, and a key id that reads like the address, have counts of their own.
    expect(await envoyClientCheck(domain, 'remote_address=192.0.2.8')).toMatchObject({
      code: 'OK',
      remaining: 2,
    });
    expect(await envoyClientCheck(domain, 'key_id=192.0.2.7')).toMatchObject({ code: 'OK', remaining: 2 });
  });

  it('is refused with the headers when there is no remote_address either', async () => {
    const a = await envoyClientCheck(`${ns}/by-address`, 'plan=pro');
    expect(a.code).toBe('OVER_LIMIT');
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '0', 'X-RateLimit-Remaining': '0' });
    expect(a.headers['X-RateLimit-Reset']).toBe(String(windowEnds().minute));
    expect(a.headers['Retry-After']).toBeDefined();
  });

  it('is refused, remote_address or not, when the policy says Refuse', async () => {
    const a = await envoyClientCheck(`${ns}/refusing`, 'remote_address=192.0.2.7');
    // client_cmd prints no requests_per_unit of 0 (proto3 leaves zero values out).
    expect(a).toMatchObject({ code: 'OVER_LIMIT', limit: undefined });
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '0', 'X-RateLimit-Remaining': '0' });
    // A key id is counted as ever.
    expect(await envoyClientCheck(`${ns}/refusing`, 'key_id=k,remote_address=192.0.2.7')).toMatchObject({
      code: 'OK',
      limit: 3,
      remaining: 2,
    });
  });
});

describe('the plan entry', () => {
  it('is matched without regard to case, as the namespace label is', async () => {
    for (const plan of ['pro', 'Pro', 'PRO']) {
      expect(await envoyClientCheck(`${ns}/by-address`, `key_id=case-${plan},plan=${plan}`)).toMatchObject({
        code: 'OK',
        limit: 300,
        remaining: 299,
      });
    }
  });
});

describe('the CRD', () => {
  it('refuses a missingKeyId it does not know, saying what to write', async () => {
    const err = await clients()
      .custom.createNamespacedCustomObject({
        group: 'portico.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'ratelimitpolicies',
        body: {
          apiVersion: 'portico.dev/v1alpha1',
          kind: 'RateLimitPolicy',
          metadata: { name: 'bad-missing' },
          spec: { ...SPEC, missingKeyId: 'Ignore' },
        },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(String((err as { body?: unknown }).body ?? err)).toContain(
      'missingKeyId must be LimitByRemoteAddress (limit checks without a key id by the client',
    );
  });

  it('defaults missingKeyId to LimitByRemoteAddress', async () => {
    const stored = (await clients().custom.getNamespacedCustomObject({
      group: 'portico.dev',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'ratelimitpolicies',
      name: 'by-address',
    })) as { spec: RateLimitPolicySpec };
    expect(stored.spec.missingKeyId).toBe('LimitByRemoteAddress');
  });
});
