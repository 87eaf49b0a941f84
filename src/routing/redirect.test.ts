import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../api/customdomain.js';
import { CUSTOM_DOMAIN_REASONS } from '../api/reasons.js';
import {
  describeStatus,
  redirectIntent,
  redirectRouting,
  targetOrigin,
  type RedirectNotRoutedReason,
  type RedirectTargetLookup,
} from './redirect.js';

const spec = (redirect?: { to: string; statusCode?: 301 | 302 | 307 | 308 }) => ({
  spec: { hostname: 'old.example.com', ...(redirect ? { redirect } : {}) },
});

describe('redirectIntent', () => {
  it('defaults to 301 (docs/routing.md)', () => {
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

describe('redirectRouting (docs/customdomains.md, "Redirect targets")', () => {
  type Ready = 'True' | 'False' | undefined;
  const domain = (
    name: string,
    hostname: string,
    opts: { to?: string; ready?: Ready; namespace?: string; deleting?: boolean } = {},
  ): CustomDomain => ({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: {
      name,
      namespace: opts.namespace ?? 'shop',
      ...(opts.deleting ? { deletionTimestamp: new Date('2026-01-01T00:00:00Z') } : {}),
    },
    spec: {
      hostname,
      ...(opts.to === undefined ? { service: { name: 'web' } } : { redirect: { to: opts.to } }),
    },
    ...(opts.ready === undefined
      ? {}
      : {
          status: {
            conditions: [
              {
                type: 'Ready',
                status: opts.ready,
                reason: opts.ready === 'True' ? 'Live' : 'RecordNotFound',
                message: '',
                lastTransitionTime: '2026-01-01T00:00:00Z',
              },
            ],
          },
        }),
  });
  /** The lookup over `domains` (namespace shop), with `claims` hostname → holder. */
  const lookup = (
    domains: CustomDomain[],
    claims: Record<string, { namespace: string; name: string }> = {},
  ): RedirectTargetLookup => ({
    domainsInNamespace: domains,
    holderOf: (hostname) => claims[hostname],
  });
  const primary = domain('primary', 'example.com', { ready: 'True' });

  it('routes a redirect to a domain of the same project that serves', () => {
    const old = domain('old', 'old.example.com', { to: 'Example.com.' });
    const v = redirectRouting(
      old,
      lookup([old, primary], { 'example.com': { namespace: 'shop', name: 'primary' } }),
    );
    expect(v).toMatchObject({ route: true, target: 'primary', intent: { to: 'example.com', status: 301 } });
  });

  it('has nothing to say about a serving domain', () => {
    expect(redirectRouting(primary, lookup([primary]))).toBeUndefined();
  });

  it('refuses a redirect to itself: RedirectToSelf', () => {
    const self = domain('self', 'www.example.com', { to: 'www.example.com' });
    expect(redirectRouting(self, lookup([self]))).toMatchObject({ route: false, reason: 'RedirectToSelf' });
  });

  it('says a reserved target can never serve, rather than waiting for it: RedirectTargetReserved', () => {
    const reservedDomainOf = (h: string) =>
      h === 'platform.example' || h.endsWith('.platform.example') ? 'platform.example' : undefined;
    const old = domain('old', 'old.example.com', { to: 'app.platform.example' });
    // A CustomDomain of the project with that hostname (refused ReservedHostname) changes nothing.
    const target = domain('app', 'app.platform.example', { ready: 'False' });
    const v = redirectRouting(old, { ...lookup([old, target]), reservedDomainOf });
    expect(v).toMatchObject({ route: false, reason: 'RedirectTargetReserved' });
    if (v?.route === false) {
      expect(v.message).toContain(
        'spec.redirect.to is app.platform.example, under platform.example, a domain of the platform itself',
      );
      expect(v.message).not.toContain('once it serves');
    }
    const apex = redirectRouting(domain('old', 'old.example.com', { to: 'platform.example' }), {
      ...lookup([old]),
      reservedDomainOf,
    });
    if (apex?.route === false)
      expect(apex.message).toContain('platform.example, a domain of the platform itself');
    expect(apex).toMatchObject({ reason: 'RedirectTargetReserved' });
    // Without the lookup (no reserved domains), the target is judged as before.
    expect(redirectRouting(old, lookup([old, target]))).toMatchObject({ reason: 'RedirectTargetNotServing' });
  });

  it('refuses a chain a → b → c, and names c when it serves: RedirectChain', () => {
    const a = domain('a', 'a.example.com', { to: 'b.example.com' });
    const b = domain('b', 'b.example.com', { to: 'example.com', ready: 'True' });
    const v = redirectRouting(a, lookup([a, b, primary]));
    expect(v).toMatchObject({ route: false, reason: 'RedirectChain' });
    if (v?.route === false) {
      expect(v.message).toContain('b.example.com (CustomDomain b) redirects too, to example.com');
      expect(v.message).toContain('Set redirect.to to example.com');
    }
    // b itself goes straight to a serving domain: routed.
    expect(redirectRouting(b, lookup([a, b, primary]))).toMatchObject({ route: true, target: 'primary' });
  });

  it('refuses a loop a → b → a on both sides: RedirectLoop', () => {
    const a = domain('a', 'a.example.com', { to: 'b.example.com' });
    const b = domain('b', 'b.example.com', { to: 'a.example.com' });
    expect(redirectRouting(a, lookup([a, b]))).toMatchObject({ route: false, reason: 'RedirectLoop' });
    expect(redirectRouting(b, lookup([a, b]))).toMatchObject({ route: false, reason: 'RedirectLoop' });
  });

  it("refuses another project's hostname without naming the project: RedirectTargetOtherProject", () => {
    const old = domain('old', 'old.example.com', { to: 'theirs.example.net' });
    // Even a CustomDomain of this namespace with that hostname does not count: the other project holds it.
    const rival = domain('rival', 'theirs.example.net', { ready: 'False' });
    const v = redirectRouting(
      old,
      lookup([old, rival], { 'theirs.example.net': { namespace: 'other-tenant', name: 'theirs' } }),
    );
    expect(v).toMatchObject({ route: false, reason: 'RedirectTargetOtherProject' });
    if (v?.route === false) expect(v.message).not.toContain('other-tenant');
  });

  it('refuses a hostname no domain of the project has, listing those that serve: RedirectTargetNotFound', () => {
    const old = domain('old', 'old.example.com', { to: 'nowhere.example.com' });
    const v = redirectRouting(old, lookup([old, primary, domain('x', 'x.example.com', { ready: 'False' })]));
    expect(v).toMatchObject({ route: false, reason: 'RedirectTargetNotFound' });
    if (v?.route === false) expect(v.message).toContain('Domains of this project that serve: example.com.');
  });

  it('waits for a target that is not Ready, has no status, or is being deleted: RedirectTargetNotServing', () => {
    const old = domain('old', 'old.example.com', { to: 'example.com' });
    for (const target of [
      domain('primary', 'example.com', { ready: 'False' }),
      domain('primary', 'example.com'),
      domain('primary', 'example.com', { ready: 'True', deleting: true }),
    ]) {
      expect(redirectRouting(old, lookup([old, target]))).toMatchObject({
        route: false,
        reason: 'RedirectTargetNotServing',
      });
    }
    const v = redirectRouting(old, lookup([old, domain('primary', 'example.com', { ready: 'False' })]));
    if (v?.route === false) expect(v.message).toContain('its Ready condition is False (RecordNotFound)');
  });

  it('takes the claim holder as the target where two domains of the project have the hostname', () => {
    const old = domain('old', 'old.example.com', { to: 'example.com' });
    const loser = domain('a-duplicate', 'example.com', { ready: 'False' });
    const v = redirectRouting(
      old,
      lookup([old, loser, primary], { 'example.com': { namespace: 'shop', name: 'primary' } }),
    );
    expect(v).toMatchObject({ route: true, target: 'primary' });
    // Without a claim, the one that serves.
    expect(redirectRouting(old, lookup([old, loser, primary]))).toMatchObject({
      route: true,
      target: 'primary',
    });
  });

  it('writes reasons the catalogue has: a Warning where a person must act, Normal while the target comes up', () => {
    const severity: Record<RedirectNotRoutedReason, 'Warning' | 'Normal'> = {
      RedirectToSelf: 'Warning',
      RedirectTargetReserved: 'Warning',
      RedirectTargetNotFound: 'Warning',
      RedirectTargetOtherProject: 'Warning',
      RedirectTargetNotServing: 'Normal',
      RedirectChain: 'Warning',
      RedirectLoop: 'Warning',
    };
    for (const [reason, expected] of Object.entries(severity)) {
      expect(CUSTOM_DOMAIN_REASONS[reason as RedirectNotRoutedReason].severity, reason).toBe(expected);
    }
  });
});
