import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { CustomDomain, CustomDomainStatus } from '../../../api/customdomain.js';
import type { ObjectHeader } from '../../../routing/plan.js';
import type { OwnedLookup } from '../cluster-view.js';
import { withStatusProof } from '../status-proof.js';
import { acceptedBeforeIn, acceptedEvidence, releasesClaim } from './acceptance.js';

describe('releasesClaim', () => {
  it('lets the claim go for a plan, reserved or invalid refusal only', () => {
    for (const reason of ['PlanNotEligible', 'ReservedHostname', 'InvalidHostname'])
      expect(releasesClaim(reason)).toBe(true);
    for (const reason of ['NotDeployed', 'HostnameAlreadyClaimed', 'Accepted'])
      expect(releasesClaim(reason)).toBe(false);
  });
});

describe('acceptedEvidence and acceptedBeforeIn: whose Accepted=True it is', () => {
  const KEY = Buffer.alloc(32, 7);
  const OTHER_KEY = Buffer.alloc(32, 9);
  const HOST = 'www.shop.example';
  const status: CustomDomainStatus = {
    conditions: [
      {
        type: 'Accepted',
        status: 'True',
        reason: 'Accepted',
        message: '',
        lastTransitionTime: '2026-06-01T00:00:00Z',
      },
    ],
    observed: { checkedAt: '2026-06-01T00:00:00Z', result: 'RecordMatches', message: '', records: [] },
  };
  const domain = (s: CustomDomainStatus | undefined, uid = 'uid-1'): CustomDomain => ({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name: 'www', namespace: 'shop', uid },
    spec: { hostname: 'WWW.shop.example', service: { name: 'web' } },
    ...(s ? { status: s } : {}),
  });
  /** Owned caches holding `objects` (`apiVersion/kind namespace/name` → the object). */
  const view = (objects: Record<string, KubernetesObject> = {}) => ({
    owned: (h: ObjectHeader): OwnedLookup => ({
      cached: true,
      object: objects[`${h.apiVersion}/${h.kind} ${h.metadata.namespace}/${h.metadata.name}`],
    }),
  });
  /** A routing object whose controller ownerReference names CustomDomain `uid`. */
  const ownedBy = (uid: string, controller = true): KubernetesObject => ({
    metadata: {
      ownerReferences: [
        { apiVersion: 'portico.dev/v1alpha1', kind: 'CustomDomain', name: 'www', uid, controller },
      ],
    },
  });
  const signed = withStatusProof(KEY, 'uid-1', HOST, status);
  // Portico's HTTPProxy of the domain (Contour flavor), as 0.1.0 or this build wrote it.
  const mine = { 'projectcontour.io/v1/HTTPProxy shop/portico-www': ownedBy('uid-1') };

  it('the operator’s signed status is proven; the same status unsigned, by another key or for another uid is not', () => {
    expect(acceptedEvidence(view(), KEY, domain(signed))).toEqual({ proven: true, routed: false });
    expect(acceptedEvidence(view(), KEY, domain(status))).toEqual({ proven: false, routed: false });
    expect(acceptedEvidence(view(), OTHER_KEY, domain(signed))).toEqual({ proven: false, routed: false });
    expect(acceptedEvidence(view(), KEY, domain(signed, 'uid-2'))).toEqual({ proven: false, routed: false });
    // The key not loaded yet: nothing is proven.
    expect(acceptedEvidence(view(), undefined, domain(signed))).toEqual({ proven: false, routed: false });
  });

  it('a routing object of the operator’s for the domain shows it accepted; one owned otherwise does not', () => {
    expect(acceptedEvidence(view(mine), KEY, domain(status))).toEqual({ proven: false, routed: true });
    expect(
      acceptedEvidence(
        view({ 'networking.k8s.io/v1/Ingress shop/portico-www': ownedBy('uid-1') }),
        KEY,
        domain(status),
      ),
    ).toEqual({ proven: false, routed: true });
    for (const object of [ownedBy('uid-2'), ownedBy('uid-1', false), { metadata: {} }])
      expect(
        acceptedEvidence(
          view({ 'projectcontour.io/v1/HTTPProxy shop/portico-www': object }),
          KEY,
          domain(status),
        ).routed,
      ).toBe(false);
    // At a name that is not the domain's routing.
    expect(
      acceptedEvidence(
        view({ 'networking.k8s.io/v1/Ingress shop/login': ownedBy('uid-1') }),
        KEY,
        domain(status),
      ).routed,
    ).toBe(false);
    // A cache not synced yet shows nothing.
    expect(acceptedEvidence({ owned: () => ({ cached: false }) }, KEY, domain(status)).routed).toBe(false);
  });

  it('acceptedBeforeIn: an Accepted=True written by someone else, with no route of the operator’s, does not count', () => {
    expect(acceptedBeforeIn(view(), KEY, domain(status))).toBe(false);
    expect(acceptedBeforeIn(view(), KEY, domain(signed))).toBe(true);
    expect(acceptedBeforeIn(view(mine), undefined, domain(status))).toBe(true);
    expect(acceptedBeforeIn(view(mine), KEY, domain(undefined))).toBe(false);
  });
});
