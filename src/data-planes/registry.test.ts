import { describe, expect, it } from 'vitest';
import {
  CLASSES_SERVING_CLASSLESS,
  DATA_PLANE_MODULES,
  DATA_PLANES,
  FOREIGN_ROUTE_KINDS,
  INGRESS_CLASS_ANNOTATIONS,
  ROUTE_KINDS,
  dataPlaneModule,
  FLAVOR_WRITERS,
  flavorWriter,
} from './registry.js';
import { flavorSupport, INGRESS_FLAVORS } from './types.js';

describe('the data plane registry', () => {
  it('lists each data plane once, in the order of --data-plane', () => {
    expect(DATA_PLANES).toEqual(['contour', 'envoy-gateway', 'traefik', 'ingress-nginx']);
    for (const name of DATA_PLANES) expect(dataPlaneModule(name).name).toBe(name);
  });

  it("gives every module a working flavor that serves and redirects, and each of today's a cell for every flavor", () => {
    for (const m of DATA_PLANE_MODULES) {
      expect(m.flavors[m.workingFlavor]).toMatchObject({ serves: true, redirects: true });
      if (['contour', 'envoy-gateway', 'traefik', 'ingress-nginx'].includes(m.name))
        expect(Object.keys(m.flavors)).toEqual(
          expect.arrayContaining(['nginx', 'traefik', 'contour', 'gateway']),
        );
    }
  });

  it('reads a flavor a module does not list as neither served nor redirected, saying so', () => {
    expect(flavorSupport({ flavors: {} }, 'traefik')).toEqual({
      serves: false,
      redirects: false,
      why: 'it does not read the objects of the traefik flavor',
    });
    expect(flavorSupport(dataPlaneModule('traefik'), 'traefik')).toEqual({ serves: true, redirects: true });
  });

  it('has one writer for each ingress flavor, from the module whose working flavor it is', () => {
    expect(FLAVOR_WRITERS.map((w) => w.flavor).sort()).toEqual([...INGRESS_FLAVORS].sort());
    for (const flavor of INGRESS_FLAVORS) {
      const owners = DATA_PLANE_MODULES.filter((m) => m.flavorWriter?.flavor === flavor);
      expect(owners.map((m) => m.workingFlavor)).toEqual([flavor]);
      expect(flavorWriter(flavor)).toBe(owners[0]?.flavorWriter);
    }
  });

  it('knows each route kind once, with its API version, and which are CRDs', () => {
    const kinds = [...ROUTE_KINDS.values()].map((k) => [k.apiVersion, k.kind, k.crd]);
    expect(kinds).toEqual([
      ['networking.k8s.io/v1', 'Ingress', false],
      ['gateway.networking.k8s.io/v1', 'HTTPRoute', true],
      ['gateway.networking.k8s.io/v1', 'ListenerSet', true],
      ['projectcontour.io/v1', 'HTTPProxy', true],
      ['traefik.io/v1alpha1', 'Middleware', true],
    ]);
  });

  it('names who reports on an object written this pass: Contour for an HTTPProxy, the data plane or "the gateway" for Gateway API, none for an Ingress', () => {
    expect(ROUTE_KINDS.get('HTTPProxy')?.reporter?.('Envoy Gateway')).toBe('Contour');
    expect(ROUTE_KINDS.get('HTTPRoute')?.reporter?.('Envoy Gateway')).toBe('Envoy Gateway');
    expect(ROUTE_KINDS.get('ListenerSet')?.reporter?.(undefined)).toBe('the gateway');
    expect(ROUTE_KINDS.get('Ingress')?.reporter).toBeUndefined();
    expect(ROUTE_KINDS.get('Middleware')?.acknowledge).toBeUndefined();
  });

  it('reads foreign routes of Ingress, HTTPRoute and HTTPProxy, classes by Contour’s annotation first', () => {
    expect([...FOREIGN_ROUTE_KINDS].sort()).toEqual(['HTTPProxy', 'HTTPRoute', 'Ingress']);
    expect(INGRESS_CLASS_ANNOTATIONS).toEqual([
      'projectcontour.io/ingress.class',
      'kubernetes.io/ingress.class',
    ]);
    expect([...CLASSES_SERVING_CLASSLESS]).toEqual(['contour']);
  });

  it('leaves only an HTTPProxy without Portico’s ownerReference alone whatever its labels say', () => {
    const byReference = [...ROUTE_KINDS.values()].filter((k) => k.ownedByReferenceOnly).map((k) => k.kind);
    expect(byReference).toEqual(['HTTPProxy']);
  });
});
