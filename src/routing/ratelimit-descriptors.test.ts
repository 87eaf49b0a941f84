import { describe, expect, it } from 'vitest';
import { contourDescriptors } from '../controllers/ratelimitpolicy/attachment.js';
import type { RateLimitPolicy } from '../api/ratelimitpolicy.js';
import { descriptorDomain } from '../ratelimit/gateway-domain.js';
import { indexPolicy, lookupLimits, type DescriptorEntry as SentEntry } from '../ratelimit/limits.js';
import { envoyRateLimits, policyDescriptors, type DescriptorEntry } from './ratelimit-descriptors.js';

const policy = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { namespace: 'platform-api', name: 'public-api' },
  spec: { plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }], defaultPlan: 'free' },
} as RateLimitPolicy;
const headers = { keyId: 'x-api-key-id', plan: 'x-api-plan' };
const policyEntry = {
  generic_key: { descriptor_key: 'portico.dev/policy', descriptor_value: 'platform-api/public-api' },
};

type Request = { headers: Record<string, string>; address: string };

/** One entry as Envoy sends it for `request`, or `drop` when Envoy drops the whole descriptor. */
function sentEntry(entry: DescriptorEntry, request: Request): SentEntry | 'drop' {
  switch (entry.kind) {
    case 'fixed':
      return { key: entry.key, value: entry.value };
    case 'header': {
      const value = request.headers[entry.header];
      return value === undefined ? 'drop' : { key: entry.key, value };
    }
    case 'headerAbsent':
      return request.headers[entry.header] === undefined
        ? { key: 'header_match', value: entry.value }
        : 'drop';
    case 'remoteAddress':
      return { key: 'remote_address', value: request.address };
  }
}

/**
 * The descriptors Envoy builds from `descriptors` for one request, by Envoy's rules for its rate-limit
 * actions (envoy.config.route.v3.RateLimit.Action): a missing header drops the whole descriptor
 * (`request_headers` without `skip_if_absent`), a `header_value_match` that does not match drops it,
 * `remote_address` always adds the client's address.
 */
function envoySends(descriptors: readonly DescriptorEntry[][], request: Request): SentEntry[][] {
  const sent: SentEntry[][] = [];
  for (const entries of descriptors) {
    const out = entries.map((entry) => sentEntry(entry, request));
    if (!out.includes('drop')) sent.push(out.filter((e): e is SentEntry => e !== 'drop'));
  }
  return sent;
}

describe('policyDescriptors', () => {
  const compiled = {
    domain: 'platform-api/public-api',
    uid: 'u1',
    generation: 1,
    plans: [
      { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
      { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
    ],
    defaultPlan: 'free',
    overrides: [],
  };
  const requests: [string, Record<string, string>][] = [
    ['key id and plan', { 'x-api-key-id': 'k1', 'x-api-plan': 'pro' }],
    ['key id, no plan', { 'x-api-key-id': 'k1' }],
    ['no key id, a plan', { 'x-api-plan': 'pro' }],
    ['neither', {}],
  ];

  it.each(requests)(
    'makes Envoy send exactly one descriptor, naming the policy first, for a request with %s',
    (_, requestHeaders) => {
      const sent = envoySends(policyDescriptors(policy, headers), {
        headers: requestHeaders,
        address: '192.0.2.7',
      });
      expect(sent).toHaveLength(1);
      expect(descriptorDomain('portico-gateway', sent[0] ?? [], 'portico-gateway')).toBe(
        'platform-api/public-api',
      );
    },
  );

  it("has the server count a keyed request by its key id and plan, and a keyless one by the client's address under the default plan, whatever plan header it sends", () => {
    const indexed = indexPolicy(compiled);
    const check = (requestHeaders: Record<string, string>) =>
      lookupLimits(
        indexed,
        envoySends(policyDescriptors(policy, headers), {
          headers: requestHeaders,
          address: '192.0.2.7',
        })[0] ?? [],
      );
    expect(check({ 'x-api-key-id': 'k1', 'x-api-plan': 'pro' })).toMatchObject({
      kind: 'limited',
      subject: 'keyId',
      keyId: 'k1',
      plan: 'pro',
    });
    expect(check({ 'x-api-key-id': 'k1' })).toMatchObject({ kind: 'limited', keyId: 'k1', plan: 'free' });
    expect(check({ 'x-api-plan': 'pro' })).toMatchObject({
      kind: 'limited',
      subject: 'remoteAddress',
      keyId: '192.0.2.7',
      plan: 'free',
      source: 'defaultPlan',
    });
  });

  it('has the server refuse a keyless request when the policy says Refuse', () => {
    const indexed = indexPolicy({ ...compiled, missingKeyId: 'Refuse' });
    const sent = envoySends(policyDescriptors(policy, headers), { headers: {}, address: '192.0.2.7' });
    expect(lookupLimits(indexed, sent[0] ?? [])).toEqual({ kind: 'noKeyId' });
  });
});

describe('envoyRateLimits', () => {
  it('renders the three descriptors as Envoy route RateLimit actions: the policy, key_id from the header, then the plan or header_match when the plan header is absent; without the key id header, header_match and remote_address', () => {
    expect(envoyRateLimits(policy, headers)).toEqual([
      {
        actions: [
          policyEntry,
          { request_headers: { header_name: 'x-api-key-id', descriptor_key: 'key_id' } },
          { request_headers: { header_name: 'x-api-plan', descriptor_key: 'plan' } },
        ],
      },
      {
        actions: [
          policyEntry,
          { request_headers: { header_name: 'x-api-key-id', descriptor_key: 'key_id' } },
          {
            header_value_match: {
              descriptor_value: 'no-plan-header',
              expect_match: true,
              headers: [{ name: 'x-api-plan', present_match: true, invert_match: true }],
            },
          },
        ],
      },
      {
        actions: [
          policyEntry,
          {
            header_value_match: {
              descriptor_value: 'no-key-id-header',
              expect_match: true,
              headers: [{ name: 'x-api-key-id', present_match: true, invert_match: true }],
            },
          },
          { remote_address: {} },
        ],
      },
    ]);
  });

  it("has as many descriptors and entries, in the same order, as Contour's rendering (one definition)", () => {
    const contour = contourDescriptors(policy, { keyId: 'x-key', plan: 'x-tier' }) as {
      entries: unknown[];
    }[];
    const envoy = envoyRateLimits(policy, { keyId: 'x-key', plan: 'x-tier' });
    expect(envoy.map((d) => d.actions.length)).toEqual(contour.map((d) => d.entries.length));
    expect(policyDescriptors(policy, headers)).toHaveLength(3);
    const text = JSON.stringify(envoy);
    expect(text).toContain('"header_name":"x-key"');
    expect(text).toContain('"name":"x-tier"');
    expect(text).not.toContain('x-api-');
  });
});
