import { describe, expect, it } from 'vitest';
import { nginxRedirectAnnotations, nginxRedirectSummary } from './annotations.js';
import type { RedirectIntent } from '../../routing/redirect.js';

const intent = (status: 301 | 302 | 307 | 308): RedirectIntent => ({
  to: 'example.com',
  status,
  permanent: status === 301 || status === 308,
  keepsMethod: status === 307 || status === 308,
});

describe('nginxRedirectAnnotations', () => {
  it('sends every status through permanent-redirect-code, with $request_uri keeping path and query', () => {
    for (const status of [301, 302, 307, 308] as const) {
      expect(nginxRedirectAnnotations(intent(status), true)).toEqual({
        'nginx.ingress.kubernetes.io/permanent-redirect': 'https://example.com$request_uri',
        'nginx.ingress.kubernetes.io/permanent-redirect-code': String(status),
      });
    }
    expect(nginxRedirectSummary(intent(307), true).caveats).toEqual([]);
  });

  it('drops the variable when asked, and says that path and query are lost', () => {
    const annotations = nginxRedirectAnnotations(intent(301), false);
    expect(annotations['nginx.ingress.kubernetes.io/permanent-redirect']).toBe('https://example.com');
    // ingress-nginx's URLIsValidRegex: alphanumerics and -._~/: plus ,:?&= (no $).
    expect(annotations['nginx.ingress.kubernetes.io/permanent-redirect']).toMatch(/^[-._~a-zA-Z0-9/:,?&=]*$/);
    expect(nginxRedirectSummary(intent(301), false).caveats[0]).toMatch(/path and query are not kept/);
  });
});
