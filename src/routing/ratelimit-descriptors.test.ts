import { describe, expect, it } from 'vitest';
import { contourDescriptors } from '../controllers/ratelimitpolicy/attachment.js';
import type { RateLimitPolicy } from '../api/ratelimitpolicy.js';
import { envoyRateLimits, policyDescriptors } from './ratelimit-descriptors.js';

const policy = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { namespace: 'platform-api', name: 'public-api' },
  spec: { plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }], defaultPlan: 'free' },
} as RateLimitPolicy;
const headers = { keyId: 'x-api-key-id', plan: 'x-api-plan' };

describe('envoyRateLimits', () => {
  it('renders the two descriptors as Envoy route RateLimit actions: the policy, key_id from the header, then the plan or header_match when the plan header is absent', () => {
    expect(envoyRateLimits(policy, headers)).toEqual([
      {
        actions: [
          {
            generic_key: {
              descriptor_key: 'portico.dev/policy',
              descriptor_value: 'platform-api/public-api',
            },
          },
          { request_headers: { header_name: 'x-api-key-id', descriptor_key: 'key_id' } },
          { request_headers: { header_name: 'x-api-plan', descriptor_key: 'plan' } },
        ],
      },
      {
        actions: [
          {
            generic_key: {
              descriptor_key: 'portico.dev/policy',
              descriptor_value: 'platform-api/public-api',
            },
          },
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
    ]);
  });

  it("has as many descriptors and entries, in the same order, as Contour's rendering (one definition)", () => {
    const contour = contourDescriptors(policy, { keyId: 'x-key', plan: 'x-tier' }) as {
      entries: unknown[];
    }[];
    const envoy = envoyRateLimits(policy, { keyId: 'x-key', plan: 'x-tier' });
    expect(envoy.map((d) => d.actions.length)).toEqual(contour.map((d) => d.entries.length));
    expect(policyDescriptors(policy, headers)).toHaveLength(2);
    const text = JSON.stringify(envoy);
    expect(text).toContain('"header_name":"x-key"');
    expect(text).toContain('"name":"x-tier"');
    expect(text).not.toContain('x-api-');
  });
});
