import { describe, expect, it } from 'vitest';
import type { RedirectIntent } from '../../routing/redirect.js';
import {
  TRAEFIK_REDIRECT_REGEX,
  traefikMiddlewareReference,
  traefikRedirectMiddleware,
  traefikRedirectSummary,
  traefikStatuses,
} from './middleware.js';

const intent = (status: 301 | 302 | 307 | 308): RedirectIntent => ({
  to: 'example.com',
  status,
  permanent: status === 301 || status === 308,
  keepsMethod: status === 307 || status === 308,
});

/** Go's ReplaceAllString with a `${1}` template, as Traefik applies it. */
function applyRedirect(url: string, status: 301 | 302 | 307 | 308): string {
  const { regex, replacement } = traefikRedirectMiddleware(intent(status), {}).spec.redirectRegex;
  const match = new RegExp(regex).exec(url);
  if (!match) return url;
  return replacement.replace('${1}', match[1] ?? '');
}

describe('traefikRedirectMiddleware', () => {
  it('keeps path and query of the raw URL Traefik matches (scheme://host[:port] + request URI)', () => {
    expect(applyRedirect('http://old.example.com/a/b?x=1&y=%20', 301)).toBe(
      'https://example.com/a/b?x=1&y=%20',
    );
    expect(applyRedirect('https://old.example.com:8443/p?q', 302)).toBe('https://example.com/p?q');
    expect(applyRedirect('http://old.example.com/', 308)).toBe('https://example.com/');
    expect(TRAEFIK_REDIRECT_REGEX).toBe('^https?://[^/]+(.*)$');
  });

  it('maps 301/308 to permanent and 302/307 to temporary', () => {
    const permanent = (s: 301 | 302 | 307 | 308) =>
      traefikRedirectMiddleware(intent(s), {}).spec.redirectRegex.permanent;
    expect([permanent(301), permanent(302), permanent(307), permanent(308)]).toEqual([
      true,
      false,
      false,
      true,
    ]);
    expect(traefikStatuses(true)).toEqual({ get: 301, other: 308 });
    expect(traefikStatuses(false)).toEqual({ get: 302, other: 307 });
  });

  it('says which statuses Traefik cannot send', () => {
    expect(traefikRedirectSummary(intent(301)).caveats[0]).toMatch(
      /cannot send 301 Moved Permanently to methods other than GET/,
    );
    expect(traefikRedirectSummary(intent(308)).caveats[0]).toMatch(
      /cannot send 308 Permanent Redirect to GET requests/,
    );
    expect(traefikRedirectSummary(intent(302)).caveats[0]).toMatch(/302 to GET and 307 to other methods/);
    expect(traefikRedirectSummary(intent(307)).caveats[0]).toMatch(
      /cannot send 307 Temporary Redirect to GET/,
    );
  });
});

describe('traefikMiddlewareReference', () => {
  it('normalizes like Traefik (dots and runs of symbols become one dash) or uses safe naming', () => {
    expect(traefikMiddlewareReference('shop', 'portico-www-redirect', false)).toBe(
      'shop-portico-www-redirect@kubernetescrd',
    );
    expect(traefikMiddlewareReference('shop', 'portico-www.example.com-redirect', false)).toBe(
      'shop-portico-www-example-com-redirect@kubernetescrd',
    );
    expect(traefikMiddlewareReference('shop', 'portico-www.example.com-redirect', true)).toBe(
      'shop_portico-www.example.com-redirect@kubernetescrd',
    );
  });
});
