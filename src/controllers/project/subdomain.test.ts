import type { KubernetesObject, V1Ingress } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { Project } from '../../api/project.js';
import type { HTTPProxy } from '../../data-planes/contour/httpproxy.js';
import { contourSubdomainRoute } from '../../data-planes/contour/subdomain-route.js';
import type { TraefikMiddleware } from '../../data-planes/traefik/middleware.js';
import type { SubdomainRouteWriter } from '../../data-planes/types.js';
import type { HTTPRoute, ListenerSet } from '../../routing/gateway.js';
import { subdomainRouteWriter } from '../../routing/subdomain-route.js';
import {
  foreignRouteMessage,
  planSubdomain,
  subdomainHolder,
  subdomainProxyName,
  type SubdomainFacts,
} from './subdomain.js';

const HOST = 'blog.apps.example';
const SECRET = { namespace: 'portico-system', name: 'portico-apps-domain-tls' };
const ACCESS_CONTEXT = { appsDomain: 'apps.example', options: {} };

function project(domains: Partial<Project['spec']['domains']> = {}, port: number | string = 80): Project {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'Project',
    metadata: { name: 'site', namespace: 'blog', uid: 'uid-1', creationTimestamp: new Date('2026-01-01') },
    spec: { service: { name: 'web', port }, domains: { primary: 'www.blog.example', ...domains } },
  };
}

function facts(
  over: Partial<SubdomainFacts> = {},
  writer: SubdomainRouteWriter = contourSubdomainRoute,
): SubdomainFacts {
  return {
    hostname: HOST,
    writer,
    options: { ingressFlavor: 'contour' },
    readyEndpoints: 1,
    servicePorts: [{ name: 'http', port: 8080 }],
    current: () => undefined,
    routedBefore: false,
    certificate: { ready: true, message: 'valid', secret: SECRET },
    servingPrimary: undefined,
    ...over,
  };
}

/** The HTTPProxy as Contour leaves it after judging `proxy`: `valid` for its generation. */
function judged(proxy: KubernetesObject, currentStatus = 'valid'): KubernetesObject {
  return {
    ...proxy,
    metadata: { ...proxy.metadata, generation: 2 },
    status: {
      currentStatus,
      description: currentStatus === 'valid' ? 'Valid HTTPProxy' : 'Secret not found',
      conditions: [
        {
          type: 'Valid',
          status: currentStatus === 'valid' ? 'True' : 'False',
          observedGeneration: 2,
          ...(currentStatus === 'valid'
            ? {}
            : { errors: [{ type: 'TLSError', reason: 'SecretNotValid', message: 'Secret not found' }] }),
        },
      ],
    },
  } as KubernetesObject;
}

function proxyOf(plan: { apply: KubernetesObject[] }): HTTPProxy {
  return plan.apply[0] as HTTPProxy;
}

describe('planSubdomain, contour flavor', () => {
  it('serves the Service with the wildcard Secret of the operator namespace once Contour took it', () => {
    const first = planSubdomain(project(), facts());
    expect(proxyOf(first).metadata.name).toBe(subdomainProxyName(project()));
    expect(proxyOf(first).spec).toEqual({
      virtualhost: { fqdn: HOST, tls: { secretName: 'portico-system/portico-apps-domain-tls' } },
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
    });
    expect(proxyOf(first).metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'Project',
      uid: 'uid-1',
      controller: true,
    });
    expect(first.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted', answer: 'Content' });
    expect(first.awaiting).toBe(true);

    const second = planSubdomain(project(), facts({ current: () => judged(proxyOf(first)) }));
    expect(second.status).toMatchObject({
      hostname: HOST,
      serving: 'True',
      reason: 'Serving',
      answer: 'Content',
    });
    expect(second.awaiting).toBe(false);
  });

  it('reports Contour refusing the route with its reason and words, and does not wait for it again', () => {
    const proxy = proxyOf(planSubdomain(project(), facts()));
    const plan = planSubdomain(project(), facts({ current: () => judged(proxy, 'invalid') }));
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted' });
    expect(plan.status.message).toContain('SecretNotValid');
    expect(plan.status.message).toContain('Secret not found');
    expect(plan.awaiting).toBe(false);
  });

  it('routes over HTTP only, naming no Secret, until the wildcard certificate is stored', () => {
    const plan = planSubdomain(
      project(),
      facts({ certificate: { ready: false, message: 'the order failed', secret: SECRET } }),
    );
    expect(proxyOf(plan).spec.virtualhost).toEqual({ fqdn: HOST });
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'WildcardCertificatePending' });
    expect(plan.status.message).toContain('the order failed');
  });

  it('waits for the first deploy, and keeps its route through a scale to zero afterwards', () => {
    const waiting = planSubdomain(project(), facts({ readyEndpoints: 0 }));
    expect(waiting.apply).toEqual([]);
    expect(waiting.status).toMatchObject({ serving: 'False', reason: 'NotDeployed' });

    const routed = proxyOf(planSubdomain(project(), facts()));
    const scaledToZero = planSubdomain(
      project(),
      facts({ readyEndpoints: 0, routedBefore: true, current: () => judged(routed) }),
    );
    expect(scaledToZero.apply).toHaveLength(1);
    expect(scaledToZero.status.serving).toBe('True');
  });

  it('Supplement (the default) serves the content while the primary serves', () => {
    const plan = planSubdomain(project(), facts({ servingPrimary: 'www.blog.example' }));
    expect(proxyOf(plan).spec.routes[0]?.services).toEqual([{ name: 'web', port: 80 }]);
    expect(plan.status.answer).toBe('Content');
  });

  it('Replace answers a 301 to the primary once it serves, and the content until then', () => {
    const before = planSubdomain(project({ generatedSubdomain: 'Replace' }), facts());
    expect(before.status.answer).toBe('Content');
    expect(proxyOf(before).spec.routes[0]?.services).toEqual([{ name: 'web', port: 80 }]);

    const after = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts({ servingPrimary: 'www.blog.example' }),
    );
    expect(proxyOf(after).spec.routes).toEqual([
      {
        conditions: [{ prefix: '/' }],
        permitInsecure: true,
        requestRedirectPolicy: { scheme: 'https', hostname: 'www.blog.example', statusCode: 301 },
      },
    ]);
    expect(after.status).toMatchObject({ answer: 'Redirect', redirectTo: 'www.blog.example' });
  });

  it('resolves a named Service port, and reports one the Service does not have', () => {
    expect(proxyOf(planSubdomain(project({}, 'http'), facts())).spec.routes[0]?.services).toEqual([
      { name: 'web', port: 8080 },
    ]);
    const missing = planSubdomain(project({}, 'grpc'), facts());
    expect(missing.apply).toEqual([]);
    expect(missing.status.message).toBe('Service web has no port named grpc');
  });

  it('routes nothing for a Project whose subdomain another Project holds, and says which', () => {
    const plan = planSubdomain(project(), facts({ heldBy: { namespace: 'blog', name: 'first' } }));
    expect(plan.apply).toEqual([]);
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'SubdomainConflict' });
    expect(plan.status.message).toContain('Project first');
  });

  it('the TLSCertificateDelegation names the Secret for the namespaces holding a subdomain', () => {
    expect(contourSubdomainRoute.certificateAccess?.(SECRET, ['a', 'b'], ACCESS_CONTEXT)).toEqual({
      apiVersion: 'projectcontour.io/v1',
      kind: 'TLSCertificateDelegation',
      metadata: { name: 'portico-apps-domain', namespace: 'portico-system' },
      spec: { delegations: [{ secretName: 'portico-apps-domain-tls', targetNamespaces: ['a', 'b'] }] },
    });
  });
});

describe('planSubdomain, every flavor', () => {
  const ingressOf = (plan: { apply: KubernetesObject[] }): V1Ingress =>
    plan.apply.find((o) => o.kind === 'Ingress') as V1Ingress;
  /** The Ingress as a controller that published an address leaves it. */
  const published = (object: KubernetesObject): KubernetesObject =>
    ({ ...object, status: { loadBalancer: { ingress: [{ ip: '127.0.0.1' }] } } }) as KubernetesObject;

  it('traefik: an Ingress with the subdomain in spec.tls and no Secret, served once Traefik published it', () => {
    const writer = subdomainRouteWriter({ ingressFlavor: 'traefik' });
    const plan = planSubdomain(
      project(),
      facts({ options: { ingressFlavor: 'traefik', ingressClassName: 'traefik' } }, writer),
    );
    expect(plan.apply.map((o) => o.kind)).toEqual(['Ingress']);
    expect(ingressOf(plan).spec).toEqual({
      ingressClassName: 'traefik',
      tls: [{ hosts: [HOST] }],
      rules: [
        {
          host: HOST,
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { number: 80 } } } },
            ],
          },
        },
      ],
    });
    const served = planSubdomain(
      project(),
      facts({ options: { ingressFlavor: 'traefik' }, current: (o) => published(o) }, writer),
    );
    expect(served.status).toMatchObject({ serving: 'True', reason: 'Serving' });
    expect(served.status.message).toContain('TLSStore default');
    expect(writer.certificateAccess?.(SECRET, ['blog'], ACCESS_CONTEXT)).toEqual({
      apiVersion: 'traefik.io/v1alpha1',
      kind: 'TLSStore',
      metadata: { name: 'default', namespace: 'portico-system' },
      spec: { certificates: [{ secretName: 'portico-apps-domain-tls' }] },
    });
  });

  it('traefik, Replace: a Middleware redirect to the primary (301, path and query kept) referenced from the Ingress', () => {
    const writer = subdomainRouteWriter({ ingressFlavor: 'traefik' });
    const plan = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts({ options: { ingressFlavor: 'traefik' }, servingPrimary: 'www.blog.example' }, writer),
    );
    expect(plan.apply.map((o) => o.kind)).toEqual(['Middleware', 'Ingress']);
    const middleware = plan.apply[0] as TraefikMiddleware;
    expect(middleware.metadata.name).toBe('portico-subdomain-site-redirect');
    expect(middleware.spec.redirectRegex).toEqual({
      regex: '^https?://[^/]+(.*)$',
      replacement: 'https://www.blog.example${1}',
      permanent: true,
    });
    expect(ingressOf(plan).metadata?.annotations).toEqual({
      'traefik.ingress.kubernetes.io/router.middlewares':
        'blog-portico-subdomain-site-redirect@kubernetescrd',
    });
    // Serving again drops the annotation: the object as planned is no longer the object as applied.
    const serving = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts({ options: { ingressFlavor: 'traefik' }, current: () => published(ingressOf(plan)) }, writer),
    );
    expect(ingressOf(serving).metadata?.annotations).toBeUndefined();
    expect(serving.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted' });
  });

  it("nginx: the Ingress, with ingress-nginx's permanent-redirect annotations in Replace", () => {
    const writer = subdomainRouteWriter({});
    expect(writer.flavor).toBe('nginx');
    const plan = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts({ options: {}, servingPrimary: 'www.blog.example' }, writer),
    );
    expect(ingressOf(plan).metadata?.annotations).toEqual({
      'nginx.ingress.kubernetes.io/permanent-redirect': 'https://www.blog.example$request_uri',
      'nginx.ingress.kubernetes.io/permanent-redirect-code': '301',
    });
    expect(ingressOf(plan).spec?.tls).toEqual([{ hosts: [HOST] }]);
    expect(writer.certificateAccess).toBeUndefined();
  });
});

describe('planSubdomain, gateway mode', () => {
  const writer = subdomainRouteWriter({ mode: 'gateway' });
  const options = { mode: 'gateway' as const, gatewayParentRefs: [{ name: 'public', namespace: 'infra' }] };
  const GATEWAY_REF = {
    group: 'gateway.networking.k8s.io',
    kind: 'Gateway',
    name: 'public',
    namespace: 'infra',
  };
  const LISTENERSET_REF = {
    group: 'gateway.networking.k8s.io',
    kind: 'ListenerSet',
    name: 'portico-apps-domain',
    namespace: 'portico-system',
  };
  const access = (namespaces: string[]): ListenerSet =>
    writer.certificateAccess?.(SECRET, namespaces, { appsDomain: 'apps.example', options }) as ListenerSet;
  /** A parent's status entry with Accepted and ResolvedRefs True, for generation 1. */
  const parentStatus = (parentRef: object): object => ({
    parentRef,
    controllerName: 'example.com/gateway',
    conditions: [
      { type: 'Accepted', status: 'True', observedGeneration: 1, reason: 'Accepted' },
      { type: 'ResolvedRefs', status: 'True', observedGeneration: 1, reason: 'ResolvedRefs' },
    ],
  });
  /** The route as the gateway leaves it: the API server's defaults, then a status entry per parent. */
  const accepted = (route: HTTPRoute, parents: object[]): KubernetesObject =>
    ({
      ...route,
      metadata: { ...route.metadata, generation: 1 },
      spec: { ...route.spec, parentRefs: route.spec.parentRefs.map((r) => ({ ...GATEWAY_REF, ...r })) },
      status: { parents },
    }) as KubernetesObject;
  /** The ListenerSet as the gateway leaves it: Accepted and Programmed, its listener's ResolvedRefs as given. */
  const programmed = (set: ListenerSet, resolved = 'True'): KubernetesObject =>
    ({
      ...set,
      metadata: { ...set.metadata, generation: 1 },
      status: {
        conditions: [
          { type: 'Accepted', status: 'True', observedGeneration: 1 },
          { type: 'Programmed', status: resolved, observedGeneration: 1 },
        ],
        listeners: [
          {
            name: 'https',
            conditions: [
              {
                type: 'ResolvedRefs',
                status: resolved,
                observedGeneration: 1,
                reason: resolved === 'True' ? 'ResolvedRefs' : 'InvalidCertificateRef',
                message:
                  resolved === 'True' ? '' : 'Secret portico-system/portico-apps-domain-tls does not exist.',
              },
            ],
          },
        ],
      },
    }) as KubernetesObject;

  it('the ListenerSet next to the wildcard Secret: one HTTPS listener for *.<apps domain> on the first Gateway, admitting the namespaces that hold a subdomain', () => {
    expect(access(['blog', 'shop'])).toEqual({
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'ListenerSet',
      metadata: { name: 'portico-apps-domain', namespace: 'portico-system' },
      spec: {
        parentRef: {
          group: 'gateway.networking.k8s.io',
          kind: 'Gateway',
          name: 'public',
          namespace: 'infra',
        },
        listeners: [
          {
            name: 'https',
            hostname: '*.apps.example',
            port: 443,
            protocol: 'HTTPS',
            // A Secret of the ListenerSet's own namespace: no ReferenceGrant, no copy elsewhere.
            tls: {
              mode: 'Terminate',
              certificateRefs: [{ group: '', kind: 'Secret', name: 'portico-apps-domain-tls' }],
            },
            allowedRoutes: {
              namespaces: {
                from: 'Selector',
                selector: {
                  matchExpressions: [
                    { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['blog', 'shop'] },
                  ],
                },
              },
            },
          },
        ],
      },
    });
    // No namespace holds a subdomain: the listener admits routes of its own namespace only (none).
    expect(access([]).spec.listeners[0]?.allowedRoutes).toEqual({ namespaces: { from: 'Same' } });
    const port = writer.certificateAccess?.(SECRET, ['blog'], {
      appsDomain: 'apps.example',
      options: { ...options, gatewayHttpsPort: 8443 },
    }) as ListenerSet;
    expect(port.spec.listeners[0]?.port).toBe(8443);
    expect(() =>
      writer.certificateAccess?.(SECRET, ['blog'], { appsDomain: 'apps.example', options: {} }),
    ).toThrow(/--gateway-parent-refs/);
  });

  it('names the Gateway only until the wildcard is stored, then the ListenerSet too', () => {
    const pending = planSubdomain(
      project(),
      facts({ options, certificate: { ready: false, message: 'ordering', secret: SECRET } }, writer),
    );
    expect((pending.apply[0] as HTTPRoute).spec.parentRefs).toEqual([{ name: 'public', namespace: 'infra' }]);
    expect(pending.status).toMatchObject({ serving: 'False', reason: 'WildcardCertificatePending' });
    const ready = planSubdomain(project(), facts({ options }, writer));
    expect((ready.apply[0] as HTTPRoute).spec.parentRefs).toEqual([
      { name: 'public', namespace: 'infra' },
      LISTENERSET_REF,
    ]);
  });

  it('Replace: a RequestRedirect (https, the primary, 301) on both parents, Serving once the gateway accepted the route on both and programmed the ListenerSet', () => {
    const plan = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts({ options, servingPrimary: 'www.blog.example' }, writer),
    );
    const route = plan.apply[0] as HTTPRoute;
    expect(route.spec.rules).toEqual([
      {
        matches: [{ path: { type: 'PathPrefix', value: '/' } }],
        filters: [
          {
            type: 'RequestRedirect',
            requestRedirect: { scheme: 'https', hostname: 'www.blog.example', statusCode: 301 },
          },
        ],
      },
    ]);
    const both = accepted(route, [parentStatus(GATEWAY_REF), parentStatus(LISTENERSET_REF)]);
    const set = access(['blog']);
    const served = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts(
        {
          options,
          servingPrimary: 'www.blog.example',
          current: () => both,
          certificateAccess: { planned: set, current: programmed(set) },
        },
        writer,
      ),
    );
    expect(served.status).toMatchObject({ serving: 'True', reason: 'Serving', answer: 'Redirect' });
    expect(served.status.message).toContain('ListenerSet portico-system/portico-apps-domain');
  });

  it('is not Serving while the route is accepted on the Gateway alone (no status for the ListenerSet parent yet)', () => {
    const route = planSubdomain(project(), facts({ options }, writer)).apply[0] as HTTPRoute;
    const set = access(['blog']);
    const plan = planSubdomain(
      project(),
      facts(
        {
          options,
          current: () => accepted(route, [parentStatus(GATEWAY_REF)]),
          certificateAccess: { planned: set, current: programmed(set) },
        },
        writer,
      ),
    );
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted' });
    expect(plan.status.message).toContain('ListenerSet portico-system/portico-apps-domain on HTTPRoute');
    expect(plan.awaiting).toBe(true);
  });

  it("is not Serving while the ListenerSet's listener cannot use the Secret, in the gateway's words, nor while the ListenerSet is not there", () => {
    const route = planSubdomain(project(), facts({ options }, writer)).apply[0] as HTTPRoute;
    const both = accepted(route, [parentStatus(GATEWAY_REF), parentStatus(LISTENERSET_REF)]);
    const set = access(['blog']);
    const refused = planSubdomain(
      project(),
      facts(
        {
          options,
          current: () => both,
          certificateAccess: { planned: set, current: programmed(set, 'False') },
        },
        writer,
      ),
    );
    expect(refused.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted' });
    expect(refused.status.message).toContain('InvalidCertificateRef');
    expect(refused.status.message).toContain('Secret portico-system/portico-apps-domain-tls does not exist.');
    expect(refused.awaiting).toBe(false);
    const missing = planSubdomain(
      project(),
      facts(
        { options, current: () => both, certificateAccess: { planned: set, current: undefined } },
        writer,
      ),
    );
    expect(missing.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted' });
    expect(missing.status.message).toContain(
      'ListenerSet portico-system/portico-apps-domain is being written.',
    );
    expect(missing.awaiting).toBe(true);
  });
});

describe('foreign routes of a subdomain', () => {
  it("keeps the project's route and reports ForeignRoute, naming only the routes of its own namespace", () => {
    const foreign = { here: ['Ingress blog/mine'], elsewhere: 2, strays: [] };
    const plan = planSubdomain(project(), facts({ foreign }));
    expect(plan.apply).toHaveLength(1);
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'ForeignRoute' });
    expect(plan.status.message).toContain('Ingress blog/mine (this namespace)');
    expect(plan.status.message).toContain("2 routes of another namespace (not named: another tenant's)");
  });

  it("reports the namespace's own routes for apps-domain names the project does not hold", () => {
    const message = foreignRouteMessage(HOST, {
      here: [],
      elsewhere: 0,
      strays: [{ route: 'HTTPProxy blog/grab', hostname: 'shop.apps.example' }],
    });
    expect(message).toContain('HTTPProxy blog/grab names shop.apps.example');
    expect(message).not.toContain('also named by');
  });

  it('says nothing when there is nothing foreign', () => {
    expect(foreignRouteMessage(HOST, { here: [], elsewhere: 0, strays: [] })).toBeUndefined();
    expect(foreignRouteMessage(HOST, undefined)).toBeUndefined();
    expect(
      planSubdomain(project(), facts({ foreign: { here: [], elsewhere: 0, strays: [] } })).status.reason,
    ).not.toBe('ForeignRoute');
  });
});

describe('subdomainHolder', () => {
  it('is the oldest Project, then the smallest namespace/name', () => {
    const at = (name: string, iso: string): Project => ({
      ...project(),
      metadata: { name, namespace: 'blog', uid: name, creationTimestamp: new Date(iso) },
    });
    expect(subdomainHolder([at('b', '2026-02-01'), at('a', '2026-03-01')])?.metadata.name).toBe('b');
    expect(subdomainHolder([at('b', '2026-02-01'), at('a', '2026-02-01')])?.metadata.name).toBe('a');
    expect(subdomainHolder([])).toBeUndefined();
  });
});
