import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../api/customdomain.js';
import { routeOwners } from './reconciler.js';

const domain = (namespace: string, uid: string | undefined): CustomDomain =>
  ({ metadata: { name: 'www', namespace, ...(uid ? { uid } : {}) } }) as CustomDomain;

describe('routeOwners (whose routes are not foreign to a domain)', () => {
  it('is the domain itself and the holder of its hostname’s claim, each in its own namespace', () => {
    expect(routeOwners(domain('victim', 'uid-v'), { namespace: 'victim', uid: 'uid-v' })).toEqual(
      new Set(['victim/uid-v']),
    );
    // A CustomDomain of a tenant for another project's hostname: its own route is not reported on
    // itself, but the holder's routes are the holder's.
    expect(routeOwners(domain('hijacker', 'uid-a'), { namespace: 'victim', uid: 'uid-v' })).toEqual(
      new Set(['hijacker/uid-a', 'victim/uid-v']),
    );
    expect(routeOwners(domain('victim', undefined), undefined)).toEqual(new Set());
  });
});
