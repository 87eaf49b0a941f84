import { describe, expect, it } from 'vitest';
import {
  DATA_PLANES,
  FLAVOR_SUPPORT,
  ROUTING_FLAVORS,
  routingFlavor,
  unsupportedByDataPlane,
  WORKING_FLAGS,
  WORKING_FLAVOR,
  type DataPlane,
  type RoutingFlavor,
} from './data-planes.js';
import type { RoutingOptions } from './options.js';

const optionsOf = (flavor: RoutingFlavor): Pick<RoutingOptions, 'mode' | 'ingressFlavor'> =>
  flavor === 'gateway' ? { mode: 'gateway' } : { mode: 'ingress', ingressFlavor: flavor };

/**
 * The table as docs/routing.md states it ("Data planes and flavors"): serves / redirects per cell.
 * Written out here, cell by cell, so that a change to FLAVOR_SUPPORT must change this too.
 */
const EXPECTED: Record<DataPlane, Record<RoutingFlavor, [serves: boolean, redirects: boolean]>> = {
  contour: { nginx: [true, false], traefik: [true, false], contour: [true, true], gateway: [false, false] },
  'envoy-gateway': {
    nginx: [false, false],
    traefik: [false, false],
    contour: [false, false],
    gateway: [true, true],
  },
  traefik: { nginx: [true, false], traefik: [true, true], contour: [false, false], gateway: [false, false] },
  'ingress-nginx': {
    nginx: [true, true],
    traefik: [true, false],
    contour: [false, false],
    gateway: [false, false],
  },
};

describe('data plane × flavor (docs/routing.md, "Data planes and flavors")', () => {
  for (const plane of DATA_PLANES) {
    for (const flavor of ROUTING_FLAVORS) {
      const [serves, redirects] = EXPECTED[plane][flavor];
      it(`${plane} × ${flavor}: ${serves ? 'serves' : 'does not serve'}, ${redirects ? 'redirects' : 'does not redirect'}`, () => {
        expect(FLAVOR_SUPPORT[plane][flavor]).toMatchObject({ serves, redirects });
        const options = optionsOf(flavor);
        const served = unsupportedByDataPlane(plane, options, false);
        const redirected = unsupportedByDataPlane(plane, options, true);
        expect(served === undefined).toBe(serves);
        expect(redirected === undefined).toBe(redirects);
        for (const message of [served, redirected].filter((m) => m !== undefined)) {
          // The message names the data plane's flag, what it does, and the flags that work.
          expect(message).toContain(`--data-plane ${plane}`);
          expect(message).toContain(FLAVOR_SUPPORT[plane][flavor].why ?? 'a reason');
          expect(message).toContain(`Start the operator with ${WORKING_FLAGS[plane]}`);
        }
      });
    }
  }

  it('has a working flavor for every data plane, which serves and redirects', () => {
    for (const plane of DATA_PLANES) {
      expect(FLAVOR_SUPPORT[plane][WORKING_FLAVOR[plane]]).toMatchObject({ serves: true, redirects: true });
      expect(WORKING_FLAGS[plane]).toContain(
        WORKING_FLAVOR[plane] === 'gateway'
          ? '--routing-mode gateway'
          : `--ingress-flavor ${WORKING_FLAVOR[plane]}`,
      );
    }
  });

  it('gives a reason wherever a cell says no', () => {
    for (const plane of DATA_PLANES)
      for (const flavor of ROUTING_FLAVORS) {
        const cell = FLAVOR_SUPPORT[plane][flavor];
        if (!cell.serves || !cell.redirects) expect(cell.why, `${plane} × ${flavor}`).toBeTruthy();
      }
  });

  it('judges nothing when no data plane is declared', () => {
    for (const flavor of ROUTING_FLAVORS) {
      expect(unsupportedByDataPlane(undefined, optionsOf(flavor), false)).toBeUndefined();
      expect(unsupportedByDataPlane(undefined, optionsOf(flavor), true)).toBeUndefined();
    }
  });

  it("reads the flavor from the settings: ingress mode's default flavor is nginx", () => {
    expect(routingFlavor({})).toBe('nginx');
    expect(routingFlavor({ ingressFlavor: 'contour' })).toBe('contour');
    expect(routingFlavor({ mode: 'gateway', ingressFlavor: 'contour' })).toBe('gateway');
  });

  it("says what Contour does with the nginx flavor's redirect, and which flag to set", () => {
    expect(unsupportedByDataPlane('contour', {}, true)).toBe(
      'The operator runs with --ingress-flavor nginx for data plane Contour (--data-plane contour), and Contour cannot redirect this domain that way: it serves the Ingress but ignores ingress-nginx\'s permanent-redirect annotations, so the hostname would be proxied to the Ingress\'s backend instead of redirected. Start the operator with --routing-mode ingress --ingress-flavor contour, the flavor Contour takes (docs/routing.md, "Data planes and flavors").',
    );
  });
});
