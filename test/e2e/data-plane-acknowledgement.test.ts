/**
 * Routed (and so Ready) only once the data plane has taken the route (docs/routing.md, "Data-plane
 * acknowledgement"), on the real stack with the Gateway API CRDs installed. Ingress mode is judged
 * by the stack's real Contour (test/e2e/contour-ingress.test.ts, its acknowledgement and its
 * absence). No Gateway API implementation runs in this stack (Contour here serves Ingress and
 * HTTPProxy only), so the gateway tests play one by writing the status fields a real one writes (an
 * HTTPRoute's `status.parents`; a ListenerSet's conditions), and say so in their names.
 *
 * The tests stop the stack's operator and run operators of their own: with the acknowledgement off,
 * then on in gateway mode; the stack's operator is started again at the end.
 */
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HTTPRoute, ListenerSet } from '../../src/routing/gateway.js';
import {
  createServingDomain,
  customDomainApi,
  deleteCustomDomain,
  domainCondition,
  getCustomDomain,
  kube,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { installRoutingCrds } from './support/routing-crds.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const GATEWAY = { group: 'gateway.networking.k8s.io', version: 'v1' } as const;
const GATEWAY_NAMESPACE = unique('infra');
const CONTROLLER_NAME = 'example.com/e2e-test-gateway';
const HOLD_FINALIZER = 'e2e.portico.dev/hold';

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

/** Stops the running operator (the stack's, the first time) and starts one with `overrides`. */
async function runOperator(name: string, overrides: Record<string, string>): Promise<void> {
  if (operator) await stopOperator(operator);
  else stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, name, { '--data-plane-acknowledgement': 'true', ...overrides });
}

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function statusCondition(
  type: string,
  status: 'True' | 'False',
  observedGeneration: number,
  reason: string,
  message: string,
): Record<string, unknown> {
  return { type, status, reason, message, observedGeneration, lastTransitionTime: new Date().toISOString() };
}

describe('with the data-plane acknowledgement off', () => {
  beforeAll(async () => {
    await runOperator('ack-off', { '--data-plane-acknowledgement': 'false' });
  });

  it('is Ready, and Routed and Ready say the route is written but unconfirmed', async () => {
    const { ns, hostname } = await createServingDomain('ack-off');
    const cd = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 60_000);
    expect(domainCondition(cd, 'Routed')).toMatchObject({ status: 'True', reason: 'RoutesReady' });
    expect(domainCondition(cd, 'Routed').message).toContain('Written, but unconfirmed');
    expect(domainCondition(cd, 'Ready').message).toBe(
      `${hostname} has certificate ${cd.status?.certificate?.serialNumber} and its routing is written, but unconfirmed: the data-plane acknowledgement is off, so the ingress controller or gateway is not asked. ` +
        'Serving was not observed: no HTTPS request is made while the serving check is off (--serving-check-address, chart value routing.servingCheck.address).',
    );
  });
});

describe('gateway mode with the acknowledgement on (the test plays the Gateway: no Gateway API implementation runs in this stack)', () => {
  beforeAll(async () => {
    await installRoutingCrds();
    await kube().core.createNamespace({ body: { metadata: { name: GATEWAY_NAMESPACE } } });
    // The platform's Gateway as docs/routing.md asks for it: ListenerSets allowed from every namespace.
    await kube().custom.createNamespacedCustomObject({
      ...GATEWAY,
      plural: 'gateways',
      namespace: GATEWAY_NAMESPACE,
      body: {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'Gateway',
        metadata: { name: 'public', namespace: GATEWAY_NAMESPACE },
        spec: {
          gatewayClassName: 'example',
          allowedListeners: { namespaces: { from: 'All' } },
          listeners: [
            { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
          ],
        },
      },
    });
    await runOperator('ack-gateway', {
      '--routing-mode': 'gateway',
      '--gateway-parent-refs': `${GATEWAY_NAMESPACE}/public`,
      // The stack's operator is started with `--data-plane-name Contour`; the gateway here is the
      // test's, which has no name: the messages say "the gateway".
      '--data-plane-name': '',
    });
  });

  async function read<T extends KubernetesObject>(plural: string, ns: string, name: string): Promise<T> {
    return (await kube().custom.getNamespacedCustomObject({ ...GATEWAY, plural, namespace: ns, name })) as T;
  }

  /** The gateway's part: its word on each parent of the HTTPRoute, for the route's current generation. */
  async function reportOnRoute(ns: string, gatewayAccepts: boolean): Promise<void> {
    const route = await read<HTTPRoute>('httproutes', ns, 'portico-www');
    const generation = route.metadata.generation ?? 0;
    const parents = route.spec.parentRefs.map((parentRef) => {
      const refuse = !gatewayAccepts && (parentRef.kind ?? 'Gateway') === 'Gateway';
      return {
        parentRef,
        controllerName: CONTROLLER_NAME,
        conditions: [
          refuse
            ? statusCondition(
                'Accepted',
                'False',
                generation,
                'NotAllowedByListeners',
                `no listener of Gateway ${GATEWAY_NAMESPACE}/public admits routes for this hostname`,
              )
            : statusCondition('Accepted', 'True', generation, 'Accepted', 'Route is accepted'),
          statusCondition(
            'ResolvedRefs',
            'True',
            generation,
            'ResolvedRefs',
            'Resolved all the Object references',
          ),
        ],
      };
    });
    await kube().custom.patchNamespacedCustomObjectStatus(
      { ...GATEWAY, plural: 'httproutes', namespace: ns, name: 'portico-www', body: { status: { parents } } },
      mergePatch,
    );
  }

  /** The gateway's part for the ListenerSet: accepted and programmed at its generation. */
  async function programListenerSet(ns: string): Promise<void> {
    const set = await read<ListenerSet>('listenersets', ns, 'portico-www');
    const generation = set.metadata.generation ?? 0;
    await kube().custom.patchNamespacedCustomObjectStatus(
      {
        ...GATEWAY,
        plural: 'listenersets',
        namespace: ns,
        name: 'portico-www',
        body: {
          status: {
            conditions: [
              statusCondition('Accepted', 'True', generation, 'Accepted', 'ListenerSet is accepted'),
              statusCondition('Programmed', 'True', generation, 'Programmed', 'ListenerSet is programmed'),
            ],
          },
        },
      },
      mergePatch,
    );
  }

  let ns = '';
  let hostname = '';

  it("keeps a domain whose HTTPRoute the gateway (played by the test) does not accept not Ready, with the gateway's message; Ready once accepted", async () => {
    ({ ns, hostname } = await createServingDomain('ack-gw'));
    await waitForCondition(ns, 'www', 'CertificateReady', 'True', undefined, 60_000);
    const awaiting = await waitForCondition(ns, 'www', 'Routed', 'False', 'AwaitingDataPlane', 30_000);
    // The CRD's default status of a ListenerSet, which a Gateway without ListenerSet support leaves.
    expect(domainCondition(awaiting, 'Routed').message).toContain('Waiting for controller');

    await programListenerSet(ns);
    await reportOnRoute(ns, false);
    const refused = await waitForCondition(ns, 'www', 'Routed', 'False', 'NotAllowedByListeners', 15_000);
    expect(domainCondition(refused, 'Routed').message).toContain(
      `Gateway ${GATEWAY_NAMESPACE}/public on HTTPRoute portico-www (${CONTROLLER_NAME}): Accepted=False (NotAllowedByListeners): no listener of Gateway ${GATEWAY_NAMESPACE}/public admits routes for this hostname`,
    );
    expect(domainCondition(refused, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'NotAllowedByListeners',
    });
    expect(refused.status?.phase).not.toBe('Live');

    await reportOnRoute(ns, true);
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 15_000);
    const ready = domainCondition(live, 'Ready').message ?? '';
    expect(ready).toContain(
      `${hostname} has certificate ${live.status?.certificate?.serialNumber}, and its route is acknowledged: `,
    );
    expect(ready).toContain(
      `Gateway ${GATEWAY_NAMESPACE}/public, ListenerSet ${ns}/portico-www accepted HTTPRoute portico-www.`,
    );
    expect(ready).toContain('programmed ListenerSet portico-www.');
    expect(ready).toContain('Serving was not observed');
    expect(ready).not.toContain('serves over HTTPS');
    expect(domainCondition(live, 'Routed').message).toContain(
      `Gateway ${GATEWAY_NAMESPACE}/public, ListenerSet ${ns}/portico-www accepted HTTPRoute portico-www.`,
    );
    expect(domainCondition(live, 'Routed').message).toContain(
      'The gateway programmed ListenerSet portico-www.',
    );
  });

  it("a Live domain's ListenerSet has an HTTPS listener for its hostname that names its Secret, and the HTTPRoute names the ListenerSet", async () => {
    const set = await read<ListenerSet>('listenersets', ns, 'portico-www');
    expect(set.spec.parentRef).toMatchObject({
      kind: 'Gateway',
      name: 'public',
      namespace: GATEWAY_NAMESPACE,
    });
    expect(set.spec.listeners).toEqual([
      expect.objectContaining({
        name: 'https',
        hostname,
        port: 443,
        protocol: 'HTTPS',
        tls: { mode: 'Terminate', certificateRefs: [{ group: '', kind: 'Secret', name: 'www-tls' }] },
      }),
    ]);
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    expect(secret.type).toBe('kubernetes.io/tls');
    const route = await read<HTTPRoute>('httproutes', ns, 'portico-www');
    expect(route.spec.parentRefs).toContainEqual(
      expect.objectContaining({ kind: 'ListenerSet', name: 'portico-www' }),
    );
  });

  it('deleting the domain removes its ListenerSet before its Secret (the test holds the ListenerSet with a finalizer)', async () => {
    await kube().custom.patchNamespacedCustomObject(
      {
        ...GATEWAY,
        plural: 'listenersets',
        namespace: ns,
        name: 'portico-www',
        body: { metadata: { finalizers: [HOLD_FINALIZER] } },
      },
      mergePatch,
    );
    await deleteCustomDomain(ns, 'www');
    await waitFor('the ListenerSet deleted (held by the finalizer)', async () => {
      const set = await read<ListenerSet>('listenersets', ns, 'portico-www');
      return set.metadata.deletionTimestamp ? set : undefined;
    });
    // While the ListenerSet is still there, the Secret it names stays: the operator waits.
    await new Promise((r) => setTimeout(r, 3_000));
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    expect(secret.metadata?.deletionTimestamp).toBeUndefined();
    expect((await getCustomDomain(ns, 'www')).metadata.deletionTimestamp).toBeDefined();

    await kube().custom.patchNamespacedCustomObject(
      {
        ...GATEWAY,
        plural: 'listenersets',
        namespace: ns,
        name: 'portico-www',
        body: { metadata: { finalizers: null } },
      },
      mergePatch,
    );
    await waitFor('the Secret and the CustomDomain gone', async () => {
      const secrets = await kube().core.listNamespacedSecret({ namespace: ns });
      const domains = (await kube().custom.listNamespacedCustomObject({
        ...customDomainApi,
        namespace: ns,
      })) as { items: unknown[] };
      return secrets.items.some((s) => s.metadata?.name === 'www-tls') || domains.items.length > 0
        ? undefined
        : true;
    });
  });
});
