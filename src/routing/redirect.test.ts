import { describe, expect, it } from 'vitest';
import { describeStatus, redirectIntent, targetOrigin } from './redirect.js';

const spec = (redirect?: { to: string; statusCode?: 301 | 302 | 307 | 308 }) => ({
  spec: { hostname: 'old.example.com', ...(redirect ? { redirect } : {}) },
});

describe('redirectIntent', () => {
  it('defaults to 301, the documented value (spec §2)', () => {
    expect(redirectIntent(spec({ to: 'example.com' }))).toEqual({
      to: 'example.com',
      status: 301,
      permanent: true,
      keepsMethod: false,
    });
  });

  it('tells permanence and method preservation apart (RFC 9110 §15.4)', () => {
    const of = (statusCode: 301 | 302 | 307 | 308) => redirectIntent(spec({ to: 'a.example', statusCode }));
    expect([301, 302, 307, 308].map((s) => of(s as 301)?.permanent)).toEqual([true, false, false, true]);
    expect([301, 302, 307, 308].map((s) => of(s as 301)?.keepsMethod)).toEqual([false, false, true, true]);
  });

  it('is undefined for a serving domain', () => {
    expect(redirectIntent(spec())).toBeUndefined();
  });

  it('writes an https origin and a named status', () => {
    const intent = redirectIntent(spec({ to: 'Example.com.', statusCode: 308 }));
    expect(intent && targetOrigin(intent)).toBe('https://example.com');
    expect(describeStatus(308)).toBe('308 Permanent Redirect');
  });
});
