import { describe, expect, it } from 'vitest';
import { forwardRule, gatewayRedirectSummary, httpRoute, redirectRule } from './gateway.js';
import type { RedirectIntent } from './redirect.js';

const intent = (status: 301 | 302 | 307 | 308): RedirectIntent => ({
  to: 'example.com',
  status,
  permanent: status === 301 || status === 308,
  keepsMethod: status === 307 || status === 308,
});

describe('HTTPRoute rules', () => {
  it('redirects with scheme, hostname and status only, so path and query are kept', () => {
    expect(redirectRule(intent(307))).toEqual({
      matches: [{ path: { type: 'PathPrefix', value: '/' } }],
      filters: [
        {
          type: 'RequestRedirect',
          requestRedirect: { scheme: 'https', hostname: 'example.com', statusCode: 307 },
        },
      ],
    });
    expect(redirectRule(intent(301)).backendRefs).toBeUndefined();
  });

  it('builds a route on the given parents for one hostname', () => {
    const parents = [{ name: 'public', namespace: 'infra' }];
    const route = httpRoute({ name: 'r', namespace: 'shop' }, 'www.example.com', parents, [
      forwardRule('/', { name: 'web', port: 80 }),
    ]);
    expect(route.spec).toEqual({
      parentRefs: [{ name: 'public', namespace: 'infra' }],
      hostnames: ['www.example.com'],
      rules: [
        { matches: [{ path: { type: 'PathPrefix', value: '/' } }], backendRefs: [{ name: 'web', port: 80 }] },
      ],
    });
    expect(route.spec.parentRefs[0]).not.toBe(parents[0]);
  });

  it('warns that 307 and 308 are Extended support', () => {
    expect(gatewayRedirectSummary(intent(301)).caveats).toEqual([]);
    expect(gatewayRedirectSummary(intent(302)).caveats).toEqual([]);
    expect(gatewayRedirectSummary(intent(308)).caveats[0]).toMatch(/Extended.*UnsupportedValue/);
  });
});
