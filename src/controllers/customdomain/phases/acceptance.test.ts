import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { CustomDomain, CustomDomainStatus } from '../../../api/customdomain.js';
import type { ObjectHeader } from '../../../routing/plan.js';
import type { RoutingClassSettings } from '../../../routing/routing-class.js';
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
  /** The chart's defaults: ingress mode, Portico's own class `portico`, reserved by admission. */
  const CLASS: RoutingClassSettings = { mode: 'ingress', ingressClassName: 'portico' };
  /** No routing class: nothing reserves any route. */
  const NO_CLASS: RoutingClassSettings = { mode: 'ingress' };
  /**
   * A routing object whose controller ownerReference names CustomDomain `uid`, of ingress class
   * `ingressClass` (`spec.ingressClassName`; null: none).
   */
  const ownedBy = (
    uid: string,
    controller = true,
    ingressClass: string | null = 'portico',
  ): KubernetesObject =>
    ({
      metadata: {
        ownerReferences: [
          { apiVersion: 'portico.dev/v1alpha1', kind: 'CustomDomain', name: 'www', uid, controller },
        ],
      },
      spec: ingressClass === null ? {} : { ingressClassName: ingressClass },
    }) as KubernetesObject;
  const signed = withStatusProof(KEY, 'uid-1', HOST, status);
  // Portico's HTTPProxy of the domain (Contour flavor), as this build writes it with class portico.
  const mine = { 'projectcontour.io/v1/HTTPProxy shop/portico-www': ownedBy('uid-1') };

  it('the operator’s signed status is proven; the same status unsigned, by another key or for another uid is not', () => {
    expect(acceptedEvidence(view(), KEY, domain(signed), CLASS)).toEqual({ proven: true, routed: false });
    expect(acceptedEvidence(view(), KEY, domain(status), CLASS)).toEqual({ proven: false, routed: false });
    expect(acceptedEvidence(view(), OTHER_KEY, domain(signed), CLASS)).toEqual({
      proven: false,
      routed: false,
    });
    expect(acceptedEvidence(view(), KEY, domain(signed, 'uid-2'), CLASS)).toEqual({
      proven: false,
      routed: false,
    });
    // The key not loaded yet: nothing is proven.
    expect(acceptedEvidence(view(), undefined, domain(signed), CLASS)).toEqual({
      proven: false,
      routed: false,
    });
  });

  it('a routing object of the operator’s for the domain shows it accepted; one owned otherwise does not', () => {
    expect(acceptedEvidence(view(mine), KEY, domain(status), CLASS)).toEqual({ proven: false, routed: true });
    expect(
      acceptedEvidence(
        view({ 'networking.k8s.io/v1/Ingress shop/portico-www': ownedBy('uid-1') }),
        KEY,
        domain(status),
        CLASS,
      ),
    ).toEqual({ proven: false, routed: true });
    for (const object of [ownedBy('uid-2'), ownedBy('uid-1', false), { metadata: {} }])
      expect(
        acceptedEvidence(
          view({ 'projectcontour.io/v1/HTTPProxy shop/portico-www': object }),
          KEY,
          domain(status),
          CLASS,
        ).routed,
      ).toBe(false);
    // At a name that is not the domain's routing.
    expect(
      acceptedEvidence(
        view({ 'networking.k8s.io/v1/Ingress shop/login': ownedBy('uid-1') }),
        KEY,
        domain(status),
        CLASS,
      ).routed,
    ).toBe(false);
    // A cache not synced yet shows nothing.
    expect(acceptedEvidence({ owned: () => ({ cached: false }) }, KEY, domain(status), CLASS).routed).toBe(
      false,
    );
  });

  it('a route at Portico’s name owned by the domain but outside Portico’s routing class (anyone who may create a route could write it) does not count', () => {
    const at = (object: KubernetesObject, kind = 'networking.k8s.io/v1/Ingress') => ({
      [`${kind} shop/portico-www`]: object,
    });
    // Another class, none, or Portico's class in spec.ingressClassName under an annotation naming
    // another one (Contour and the routing-class policy read the annotation first).
    const forged: KubernetesObject[] = [
      ownedBy('uid-1', true, 'nginx'),
      ownedBy('uid-1', true, null),
      {
        ...ownedBy('uid-1'),
        metadata: { ...ownedBy('uid-1').metadata, annotations: { 'kubernetes.io/ingress.class': 'nginx' } },
      },
    ];
    for (const object of forged) {
      expect(acceptedEvidence(view(at(object)), KEY, domain(status), CLASS).routed).toBe(false);
      expect(
        acceptedEvidence(view(at(object, 'projectcontour.io/v1/HTTPProxy')), KEY, domain(status), CLASS)
          .routed,
      ).toBe(false);
      expect(acceptedBeforeIn(view(at(object)), KEY, domain(status), CLASS)).toBe(false);
    }
    // A Traefik Middleware has no class: nothing reserves it.
    expect(
      acceptedEvidence(
        view(at(ownedBy('uid-1'), 'traefik.io/v1alpha1/Middleware')),
        KEY,
        domain(status),
        CLASS,
      ).routed,
    ).toBe(false);
    // Without a routing class nothing is reserved, and any class counts (the chart's opt-out).
    expect(
      acceptedEvidence(view(at(forged[0] as KubernetesObject)), KEY, domain(status), NO_CLASS).routed,
    ).toBe(true);
  });

  it('gateway mode: an HTTPRoute counts only when it names a Gateway the gateway-routes policy reserves (one with a namespace other than the route’s)', () => {
    const GATEWAY: RoutingClassSettings = {
      mode: 'gateway',
      gatewayParentRefs: [{ name: 'public', namespace: 'infra' }],
    };
    const route = (parentRefs: unknown[]): Record<string, KubernetesObject> => ({
      'gateway.networking.k8s.io/v1/HTTPRoute shop/portico-www': {
        ...ownedBy('uid-1', true, null),
        metadata: { ...ownedBy('uid-1').metadata, namespace: 'shop' },
        spec: { parentRefs },
      } as KubernetesObject,
    });
    expect(
      acceptedEvidence(view(route([{ name: 'public', namespace: 'infra' }])), KEY, domain(status), GATEWAY)
        .routed,
    ).toBe(true);
    for (const refs of [
      [{ name: 'public' }],
      [{ name: 'own', namespace: 'infra' }],
      [{ name: 'public', namespace: 'infra', kind: 'ListenerSet' }],
      [],
    ])
      expect(acceptedEvidence(view(route(refs)), KEY, domain(status), GATEWAY).routed).toBe(false);
    // Portico's class of Ingresses means nothing in gateway mode.
    expect(
      acceptedEvidence(
        view({ 'networking.k8s.io/v1/Ingress shop/portico-www': ownedBy('uid-1') }),
        KEY,
        domain(status),
        GATEWAY,
      ).routed,
    ).toBe(false);
  });

  it('acceptedBeforeIn: an Accepted=True written by someone else, with no route of the operator’s, does not count', () => {
    expect(acceptedBeforeIn(view(), KEY, domain(status), CLASS)).toBe(false);
    expect(acceptedBeforeIn(view(), KEY, domain(signed), CLASS)).toBe(true);
    expect(acceptedBeforeIn(view(mine), undefined, domain(status), CLASS)).toBe(true);
    expect(acceptedBeforeIn(view(mine), KEY, domain(undefined), CLASS)).toBe(false);
  });
});
