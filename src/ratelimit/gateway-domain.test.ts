import { describe, expect, it } from 'vitest';
import { DEFAULT_GATEWAY_DOMAIN } from '../api/ratelimitpolicy.js';
import { descriptorDomain, gatewayDomainProblem } from './gateway-domain.js';

const GW = DEFAULT_GATEWAY_DOMAIN;

describe('descriptorDomain', () => {
  it('is the request domain for a direct caller, whatever the entries', () => {
    expect(descriptorDomain('shop/api', [{ key: 'key_id', value: 'k1' }], GW)).toBe('shop/api');
    expect(descriptorDomain('shop/api', [{ key: 'portico.dev/policy', value: 'other/policy' }], GW)).toBe(
      'shop/api',
    );
  });

  it('is the policy named by the first entry when the request has the gateway domain', () => {
    const entries = [
      { key: 'portico.dev/policy', value: 'shop/api' },
      { key: 'key_id', value: 'k1' },
      { key: 'plan', value: 'pro' },
    ];
    expect(descriptorDomain(GW, entries, GW)).toBe('shop/api');
  });

  it('is no policy when the gateway domain comes without the policy entry first', () => {
    expect(descriptorDomain(GW, [{ key: 'key_id', value: 'k1' }], GW)).toBe('');
    expect(
      descriptorDomain(
        GW,
        [
          { key: 'key_id', value: 'k1' },
          { key: 'portico.dev/policy', value: 'shop/api' },
        ],
        GW,
      ),
    ).toBe('');
    expect(descriptorDomain(GW, [], GW)).toBe('');
    expect(descriptorDomain(GW, [{ key: 'portico.dev/policy' }], GW)).toBe('');
  });
});

describe('gatewayDomainProblem', () => {
  it('accepts the default and other values that are no policy domain', () => {
    expect(gatewayDomainProblem(DEFAULT_GATEWAY_DOMAIN)).toBeUndefined();
    expect(gatewayDomainProblem('contour')).toBeUndefined();
    expect(gatewayDomainProblem('gateway.example/contour')).toBeUndefined();
  });

  it("refuses empty, too long, and a policy's shape", () => {
    expect(gatewayDomainProblem('')).toBe('must not be empty');
    expect(gatewayDomainProblem('x'.repeat(513))).toMatch(/at most 512/);
    expect(gatewayDomainProblem('shop/api')).toMatch(/shape of a policy's domain/);
  });
});
