import { describe, expect, it } from 'vitest';
import {
  checkRoutingOptions,
  isRoutingOptionsError,
  parseGatewayParentRefs,
  RoutingOptionsError,
} from './options.js';

describe('checkRoutingOptions', () => {
  it('accepts the defaults and a complete gateway setting', () => {
    expect(() => {
      checkRoutingOptions({});
    }).not.toThrow();
    expect(() => {
      checkRoutingOptions({
        mode: 'gateway',
        gatewayParentRefs: [{ name: 'public', namespace: 'infra', sectionName: 'https', port: 443 }],
      });
    }).not.toThrow();
  });

  it('accepts each ingress flavor, contour included, and refuses another', () => {
    for (const ingressFlavor of ['nginx', 'traefik', 'contour'] as const)
      expect(() => {
        checkRoutingOptions({ ingressFlavor });
      }).not.toThrow();
    expect(() => {
      checkRoutingOptions({ ingressFlavor: 'haproxy' as 'nginx' });
    }).toThrow('ingress flavor must be one of nginx, traefik, contour');
  });

  it('refuses gateway mode without a parent Gateway, naming the setting', () => {
    expect(() => {
      checkRoutingOptions({ mode: 'gateway' });
    }).toThrow(/gatewayParentRefs/);
  });

  it('refuses malformed parent references and unknown modes', () => {
    const bad = [
      { mode: 'gateway' as const, gatewayParentRefs: [{ name: 'Public' }] },
      { mode: 'gateway' as const, gatewayParentRefs: [{ name: 'public', namespace: 'in.fra' }] },
      { mode: 'gateway' as const, gatewayParentRefs: [{ name: 'public', port: 0 }] },
      { mode: 'mesh' as unknown as 'gateway' },
      { ingressFlavor: 'haproxy' as unknown as 'nginx' },
    ];
    for (const options of bad) {
      let caught: unknown;
      try {
        checkRoutingOptions(options);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(RoutingOptionsError);
      expect(isRoutingOptionsError(caught)).toBe(true);
    }
  });
});

describe('parseGatewayParentRefs', () => {
  it('reads [namespace/]name[:sectionName], comma-separated', () => {
    expect(parseGatewayParentRefs('infra/public:https, internal')).toEqual([
      { name: 'public', namespace: 'infra', sectionName: 'https' },
      { name: 'internal' },
    ]);
  });

  it('refuses malformed entries with a RoutingOptionsError', () => {
    for (const bad of ['a/b/c', 'infra/', 'Infra/public', 'public:HTTPS']) {
      expect(() => parseGatewayParentRefs(bad), bad).toThrow(RoutingOptionsError);
    }
  });
});
