import { describe, expect, it } from 'vitest';
import {
  combine,
  httpProxyAcknowledgement,
  httpRouteAcknowledgement,
  ingressAcknowledgement,
  listenerSetAcknowledgement,
  type HTTPProxyWithStatus,
  type HTTPRouteWithStatus,
  type ListenerSetWithStatus,
  type RouteParentStatus,
  type StatusCondition,
  type SubCondition,
} from './acknowledgement.js';
import type { RouteParentRef } from './gateway.js';

const cond = (
  type: string,
  status: StatusCondition['status'],
  observedGeneration = 3,
  reason = type,
  message = '',
): StatusCondition => ({ type, status, reason, message, observedGeneration });

describe('ingressAcknowledgement', () => {
  it('is confirmed by a published IP or hostname, and awaited without one, naming the class', () => {
    const ingress = {
      status: { loadBalancer: { ingress: [{ ip: '203.0.113.7' }, { hostname: 'lb.example' }] } },
    };
    expect(ingressAcknowledgement(ingress, 'portico-www', 'nginx')).toEqual({
      kind: 'confirmed',
      message: 'The ingress controller took Ingress portico-www (published address 203.0.113.7, lb.example).',
    });
    const none = ingressAcknowledgement({ status: { loadBalancer: {} } }, 'portico-www', 'nginx');
    expect(none.kind).toBe('awaiting');
    expect(none.message).toContain('no address is published in its status.loadBalancer.ingress');
    expect(none.message).toContain('the controller of ingress class nginx has not taken it');
    expect(ingressAcknowledgement(undefined, 'portico-www', undefined).message).toContain(
      "the cluster's default ingress class",
    );
    expect(ingressAcknowledgement({ status: { loadBalancer: { ingress: [{}] } } }, 'x', undefined).kind).toBe(
      'awaiting',
    );
  });

  it('names the data plane when it is configured, and says since when an awaited Ingress exists', () => {
    const taken = { status: { loadBalancer: { ingress: [{ ip: '127.0.0.1' }] } } };
    expect(ingressAcknowledgement(taken, 'portico-www', undefined, 'Contour').message).toBe(
      'Contour took Ingress portico-www (published address 127.0.0.1).',
    );
    const waiting = ingressAcknowledgement(
      { metadata: { creationTimestamp: new Date('2026-11-27T10:00:00Z') } },
      'portico-www',
      'contour',
      'Contour',
    );
    expect(waiting.kind).toBe('awaiting');
    expect(waiting.message).toContain('Ingress portico-www is written since 2026-11-27T10:00:00.000Z');
    expect(waiting.message).toContain('Contour (the controller of ingress class contour) has not taken it');
  });
});

describe('httpRouteAcknowledgement', () => {
  const gateway: RouteParentRef = { name: 'public', namespace: 'infra' };
  const set: RouteParentRef = {
    group: 'gateway.networking.k8s.io',
    kind: 'ListenerSet',
    name: 'portico-www',
  };
  const route = (parents: RouteParentStatus[]): HTTPRouteWithStatus => ({
    metadata: { name: 'portico-www', namespace: 'shop', generation: 3 },
    status: { parents },
  });
  const accepted = (parentRef: RouteParentRef, generation = 3) => ({
    parentRef,
    controllerName: 'example.com/gateway',
    conditions: [cond('Accepted', 'True', generation), cond('ResolvedRefs', 'True', generation)],
  });

  it('is confirmed when every parent accepted the current generation with its references resolved', () => {
    // The gateway writes the parentRef as the API server defaulted it (group and kind set).
    const defaulted = { ...gateway, group: 'gateway.networking.k8s.io', kind: 'Gateway' } as const;
    const ack = httpRouteAcknowledgement(route([accepted(defaulted), accepted(set)]), 'portico-www', 'shop', [
      gateway,
      set,
    ]);
    expect(ack).toEqual({
      kind: 'confirmed',
      message: 'Gateway infra/public, ListenerSet shop/portico-www accepted HTTPRoute portico-www.',
    });
  });

  it('names the data plane and the controllerName it wrote in the confirmation when --data-plane-name is set', () => {
    const defaulted = { ...gateway, group: 'gateway.networking.k8s.io', kind: 'Gateway' } as const;
    const ack = httpRouteAcknowledgement(
      route([accepted(defaulted), accepted(set)]),
      'portico-www',
      'shop',
      [gateway, set],
      'Envoy Gateway',
    );
    expect(ack).toEqual({
      kind: 'confirmed',
      message:
        'Envoy Gateway (example.com/gateway) accepted HTTPRoute portico-www on Gateway infra/public, ListenerSet shop/portico-www.',
    });
  });

  it("is refused with the gateway's own reason and message", () => {
    const refused = {
      parentRef: gateway,
      controllerName: 'example.com/gateway',
      conditions: [
        cond(
          'Accepted',
          'False',
          3,
          'NotAllowedByListeners',
          'no listener allows routes from namespace shop',
        ),
        cond('ResolvedRefs', 'True'),
      ],
    };
    const ack = httpRouteAcknowledgement(route([refused, accepted(set)]), 'portico-www', 'shop', [
      gateway,
      set,
    ]);
    expect(ack).toEqual({
      kind: 'refused',
      reason: 'NotAllowedByListeners',
      message:
        'Gateway infra/public on HTTPRoute portico-www (example.com/gateway): Accepted=False (NotAllowedByListeners): no listener allows routes from namespace shop',
    });
    const unresolved = {
      parentRef: gateway,
      conditions: [
        cond('Accepted', 'True'),
        cond('ResolvedRefs', 'False', 3, 'BackendNotFound', 'no Service web'),
      ],
    };
    expect(httpRouteAcknowledgement(route([unresolved]), 'portico-www', 'shop', [gateway])).toMatchObject({
      kind: 'refused',
      reason: 'BackendNotFound',
    });
  });

  it('awaits a parent with no entry, an entry of an earlier generation, and an Unknown condition', () => {
    const missing = httpRouteAcknowledgement(route([accepted(gateway)]), 'portico-www', 'shop', [
      gateway,
      set,
    ]);
    expect(missing).toEqual({
      kind: 'awaiting',
      message:
        'ListenerSet shop/portico-www on HTTPRoute portico-www: no entry in status.parents; the gateway has not reported on it.',
    });
    const stale = httpRouteAcknowledgement(route([accepted(gateway, 2)]), 'portico-www', 'shop', [gateway]);
    expect(stale.kind).toBe('awaiting');
    expect(stale.message).toContain(
      'Accepted was reported for generation 2, not for the current generation 3',
    );
    // A refusal of an earlier generation is not the gateway's word on this one.
    const oldRefusal = {
      parentRef: gateway,
      conditions: [cond('Accepted', 'False', 2, 'NotAllowedByListeners'), cond('ResolvedRefs', 'True', 2)],
    };
    expect(httpRouteAcknowledgement(route([oldRefusal]), 'portico-www', 'shop', [gateway]).kind).toBe(
      'awaiting',
    );
    const pending = {
      parentRef: gateway,
      conditions: [
        cond('Accepted', 'Unknown', 3, 'Pending', 'Waiting for controller'),
        cond('ResolvedRefs', 'True'),
      ],
    };
    expect(httpRouteAcknowledgement(route([pending]), 'portico-www', 'shop', [gateway]).message).toContain(
      'Accepted=Unknown (Pending): Waiting for controller',
    );
    expect(httpRouteAcknowledgement(undefined, 'portico-www', 'shop', [gateway]).kind).toBe('awaiting');
  });

  it('does not take an entry for another listener of the same Gateway', () => {
    const https = { ...gateway, sectionName: 'https' };
    const ack = httpRouteAcknowledgement(route([accepted(gateway)]), 'portico-www', 'shop', [https]);
    expect(ack.kind).toBe('awaiting');
  });
});

describe('listenerSetAcknowledgement', () => {
  const set = (status: NonNullable<ListenerSetWithStatus['status']>): ListenerSetWithStatus => ({
    metadata: { name: 'portico-www', namespace: 'shop', generation: 3 },
    status,
  });

  it('is confirmed when Accepted and Programmed are True for the current generation', () => {
    expect(
      listenerSetAcknowledgement(
        set({
          conditions: [cond('Accepted', 'True'), cond('Programmed', 'True')],
          listeners: [
            { name: 'https', conditions: [cond('ResolvedRefs', 'True'), cond('Conflicted', 'False')] },
          ],
        }),
        'portico-www',
      ),
    ).toEqual({ kind: 'confirmed', message: 'The gateway programmed ListenerSet portico-www.' });
  });

  it('names the data plane in the confirmation when --data-plane-name is set', () => {
    expect(
      listenerSetAcknowledgement(
        set({ conditions: [cond('Accepted', 'True'), cond('Programmed', 'True')] }),
        'portico-www',
        'Envoy Gateway',
      ),
    ).toEqual({ kind: 'confirmed', message: 'Envoy Gateway programmed ListenerSet portico-www.' });
  });

  it("awaits the CRD's default status, which a Gateway without ListenerSet support leaves", () => {
    const defaults = set({
      conditions: [
        { type: 'Accepted', status: 'Unknown', reason: 'Pending', message: 'Waiting for controller' },
        { type: 'Programmed', status: 'Unknown', reason: 'Pending', message: 'Waiting for controller' },
      ],
    });
    const ack = listenerSetAcknowledgement(defaults, 'portico-www');
    expect(ack.kind).toBe('awaiting');
    expect(ack.message).toBe('ListenerSet portico-www: Accepted=Unknown (Pending): Waiting for controller');
    // True without an observed generation does not count for the current one.
    const ungenerated = set({
      conditions: [
        { type: 'Accepted', status: 'True', reason: 'Accepted' },
        { type: 'Programmed', status: 'True', reason: 'Programmed' },
      ],
    });
    expect(listenerSetAcknowledgement(ungenerated, 'portico-www').message).toContain(
      'Accepted was reported for generation unknown, not for the current generation 3',
    );
  });

  it("is refused with the gateway's reason: not allowed, or its listener's certificate unresolved or conflicted", () => {
    expect(
      listenerSetAcknowledgement(
        set({ conditions: [cond('Accepted', 'False', 3, 'NotAllowed', 'allowedListeners excludes shop')] }),
        'portico-www',
      ),
    ).toEqual({
      kind: 'refused',
      reason: 'NotAllowed',
      message: 'ListenerSet portico-www: Accepted=False (NotAllowed): allowedListeners excludes shop',
    });
    const badCert = set({
      conditions: [cond('Accepted', 'True'), cond('Programmed', 'True')],
      listeners: [
        {
          name: 'https',
          conditions: [cond('ResolvedRefs', 'False', 3, 'InvalidCertificateRef', 'no Secret www-tls')],
        },
      ],
    });
    expect(listenerSetAcknowledgement(badCert, 'portico-www')).toMatchObject({
      kind: 'refused',
      reason: 'InvalidCertificateRef',
    });
    const conflicted = set({
      conditions: [cond('Accepted', 'True'), cond('Programmed', 'True')],
      listeners: [{ name: 'https', conditions: [cond('Conflicted', 'True', 3, 'HostnameConflict')] }],
    });
    expect(listenerSetAcknowledgement(conflicted, 'portico-www')).toMatchObject({
      kind: 'refused',
      reason: 'HostnameConflict',
    });
  });
});

describe('httpProxyAcknowledgement (Contour)', () => {
  // Status as Contour v1.33.8 writes it (internal/status/proxystatus.go Mutate): currentStatus and
  // description from the Valid DetailedCondition; an error turns Valid False with reason ErrorPresent.
  const proxy = (status: HTTPProxyWithStatus['status'], generation = 3): HTTPProxyWithStatus => ({
    metadata: { name: 'portico-www', namespace: 'shop', generation },
    ...(status === undefined ? {} : { status }),
  });
  const valid = (observedGeneration: number, extra: object = {}) => ({
    ...cond('Valid', 'True', observedGeneration, 'Valid', 'Valid HTTPProxy'),
    ...extra,
  });
  const errorPresent = (observedGeneration: number, errors: SubCondition[]) => ({
    ...cond(
      'Valid',
      'False',
      observedGeneration,
      'ErrorPresent',
      'At least one error present, see Errors for details',
    ),
    errors,
  });

  it('is confirmed by Valid=True at the current generation (currentStatus valid), naming any warnings', () => {
    expect(
      httpProxyAcknowledgement(proxy({ currentStatus: 'valid', conditions: [valid(3)] }), 'portico-www'),
    ).toEqual({ kind: 'confirmed', message: 'Contour took HTTPProxy portico-www (currentStatus valid).' });
    const warned = proxy({
      currentStatus: 'valid',
      conditions: [
        valid(3, {
          warnings: [
            { type: 'SpecError', status: 'True', reason: 'Deprecated', message: 'field x is deprecated' },
          ],
        }),
      ],
    });
    expect(httpProxyAcknowledgement(warned, 'portico-www').message).toBe(
      'Contour took HTTPProxy portico-www (currentStatus valid). Warnings: SpecError (Deprecated): field x is deprecated.',
    );
  });

  it("is refused with Contour's own reason and message: the first error's, not ErrorPresent", () => {
    const duplicate = proxy({
      currentStatus: 'invalid',
      description: 'At least one error present, see Errors for details',
      conditions: [
        errorPresent(3, [
          {
            type: 'VirtualHostError',
            status: 'True',
            reason: 'DuplicateVhost',
            message: 'fqdn "www.shop.example" is used in multiple HTTPProxies: shop/portico-www, shop/theirs',
          },
        ]),
      ],
    });
    expect(httpProxyAcknowledgement(duplicate, 'portico-www')).toEqual({
      kind: 'refused',
      reason: 'DuplicateVhost',
      message:
        'Contour marks HTTPProxy portico-www invalid: VirtualHostError (DuplicateVhost): fqdn "www.shop.example" is used in multiple HTTPProxies: shop/portico-www, shop/theirs.',
    });
    const two = proxy({
      currentStatus: 'invalid',
      conditions: [
        errorPresent(3, [
          {
            type: 'TLSError',
            status: 'True',
            reason: 'SecretNotValid',
            message: 'Spec.VirtualHost.TLS Secret "www-tls" is invalid: Secret not found',
          },
          { type: 'ServiceError', status: 'True', reason: 'ServiceUnresolvedReference', message: 'x' },
        ]),
      ],
    });
    const refused = httpProxyAcknowledgement(two, 'portico-www');
    expect(refused).toMatchObject({ kind: 'refused', reason: 'SecretNotValid' });
    expect(refused.message).toContain('; ServiceError (ServiceUnresolvedReference): x.');
    // No errors listed: the condition's own reason.
    const bare = proxy({
      currentStatus: 'invalid',
      conditions: [cond('Valid', 'False', 3, 'Broken', 'it is')],
    });
    expect(httpProxyAcknowledgement(bare, 'portico-www')).toMatchObject({
      kind: 'refused',
      reason: 'Broken',
    });
    const orphaned = proxy({
      currentStatus: 'orphaned',
      conditions: [
        errorPresent(3, [
          {
            type: 'Orphaned',
            status: 'True',
            reason: 'Orphaned',
            message: 'this HTTPProxy is not part of a delegation chain from a root HTTPProxy',
          },
        ]),
      ],
    });
    expect(httpProxyAcknowledgement(orphaned, 'portico-www')).toMatchObject({
      kind: 'refused',
      reason: 'Orphaned',
      message: expect.stringContaining('Contour marks HTTPProxy portico-www orphaned:') as unknown,
    });
  });

  it('is awaited until Contour reports on the current generation', () => {
    expect(httpProxyAcknowledgement(undefined, 'portico-www')).toEqual({
      kind: 'awaiting',
      message: "HTTPProxy portico-www is not in the operator's cache yet.",
    });
    const none = httpProxyAcknowledgement(proxy(undefined), 'portico-www');
    expect(none.kind).toBe('awaiting');
    expect(none.message).toContain('Contour has not reported on it yet (no Valid condition)');
    // Valid for generation 2, the spec changed since (e.g. the TLS block added): not yet confirmed,
    // and an old refusal is not held against the new generation either.
    const stale = httpProxyAcknowledgement(
      proxy({ currentStatus: 'valid', conditions: [valid(2)] }),
      'portico-www',
    );
    expect(stale).toEqual({
      kind: 'awaiting',
      message:
        'HTTPProxy portico-www: Contour reported on generation 2, not yet on the current generation 3.',
    });
    const oldRefusal = proxy({
      currentStatus: 'invalid',
      conditions: [errorPresent(2, [{ type: 'X', reason: 'Y' }])],
    });
    expect(httpProxyAcknowledgement(oldRefusal, 'portico-www').kind).toBe('awaiting');
    const unknown = proxy({ conditions: [cond('Valid', 'Unknown', 3, 'Pending', 'later')] });
    expect(httpProxyAcknowledgement(unknown, 'portico-www')).toEqual({
      kind: 'awaiting',
      message: 'HTTPProxy portico-www: Valid=Unknown (Pending): later',
    });
  });
});

describe('combine', () => {
  it('confirms only when all confirm, and takes the first refusal as the reason', () => {
    const ok = { kind: 'confirmed', message: 'A.' } as const;
    const wait = { kind: 'awaiting', message: 'B.' } as const;
    const no = { kind: 'refused', reason: 'R', message: 'C.' } as const;
    expect(combine([ok, ok])).toEqual({ kind: 'confirmed', message: 'A. A.' });
    expect(combine([ok, wait])).toEqual({ kind: 'awaiting', message: 'B.' });
    expect(combine([wait, no, ok])).toEqual({ kind: 'refused', reason: 'R', message: 'B. C.' });
  });
});
