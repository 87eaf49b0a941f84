import type { KubernetesObject, V1Ingress, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CustomDomain, CustomDomainSpec } from '../api/customdomain.js';
import type { HTTPRoute, ListenerSet } from './gateway.js';
import { desiredIngress, HTTP01_PATH_PREFIX } from './ingress.js';
import type { RoutingOptions } from './options.js';
import {
  desiredRouting,
  ownedRoutingObjects,
  resolveServicePort,
  staleRoutingObjects,
  type RoutingPlan,
} from './plan.js';
import type { TraefikMiddleware } from '../data-planes/traefik/middleware.js';
import type { HTTPProxy } from '../data-planes/contour/httpproxy.js';
import type { DataPlane } from './data-planes.js';

const domain = (spec: Partial<CustomDomainSpec>, name = 'old'): CustomDomain => ({
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'CustomDomain',
  metadata: { name, namespace: 'shop', uid: 'u-1' },
  spec: { hostname: 'old.example.com', ...spec },
});
const serving = domain({ service: { name: 'web', port: 8080 } });
const redirecting = domain({ redirect: { to: 'example.com' } });
const http01Service = { fqdn: 'portico.portico-system.svc.cluster.local', port: 8089 };
const gateway: RoutingOptions = {
  mode: 'gateway',
  gatewayParentRefs: [{ name: 'public', namespace: 'infra' }],
};

function applied(plan: RoutingPlan): KubernetesObject[] {
  if (!plan.routed) throw new Error(`not routed: ${plan.message}`);
  return plan.apply;
}
function find(objs: KubernetesObject[], kind: string, name: string): KubernetesObject | undefined {
  return objs.find((o) => o.kind === kind && o.metadata?.name === name);
}
const paths = (ing: V1Ingress | undefined) => ing?.spec?.rules?.[0]?.http?.paths ?? [];

describe('desiredRouting, ingress mode', () => {
  it('serves exactly as desiredIngress did, in both flavors', () => {
    for (const ingressFlavor of ['nginx', 'traefik'] as const) {
      const options: RoutingOptions = { ingressFlavor, ingressClassName: 'public', http01Service };
      const objs = applied(desiredRouting(serving, options));
      expect(objs.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual([
        'Service/portico-acme-http01',
        'Ingress/portico-old',
      ]);
      expect(objs[1]).toEqual(desiredIngress(serving, options));
    }
  });

  it('nginx: redirects with annotations on the main Ingress; the challenge path has its own Ingress', () => {
    const plan = desiredRouting(domain({ redirect: { to: 'example.com', statusCode: 308 } }), {
      http01Service,
    });
    const objs = applied(plan);
    expect(objs.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual([
      'Service/portico-acme-http01',
      'Ingress/portico--acme-old',
      'Ingress/portico-old',
    ]);
    const main = find(objs, 'Ingress', 'portico-old') as V1Ingress | undefined;
    expect(main?.metadata?.annotations).toEqual({
      'nginx.ingress.kubernetes.io/permanent-redirect': 'https://example.com$request_uri',
      'nginx.ingress.kubernetes.io/permanent-redirect-code': '308',
    });
    expect(main?.spec?.tls).toEqual([{ hosts: ['old.example.com'], secretName: 'old-tls' }]);
    expect(paths(main).map((p) => p.path)).toEqual(['/']);
    const acme = find(objs, 'Ingress', 'portico--acme-old') as V1Ingress | undefined;
    expect(acme?.metadata?.annotations).toBeUndefined();
    expect(acme?.metadata?.ownerReferences?.[0]?.uid).toBe('u-1');
    expect(paths(acme)).toEqual([
      {
        path: HTTP01_PATH_PREFIX,
        pathType: 'Prefix',
        backend: { service: { name: 'portico-acme-http01', port: { number: 8089 } } },
      },
    ]);
    expect(plan.routed && plan.message).toBe(
      'Ingress portico-old (ingress-nginx) answers old.example.com with 308 Permanent Redirect to https://example.com, ' +
        'keeping path and query. /.well-known/acme-challenge/ goes to the operator through Ingress portico--acme-old.',
    );
  });

  it('nginx without the challenge Service (the sandbox): one Ingress', () => {
    const objs = applied(desiredRouting(redirecting, {}));
    expect(objs.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual(['Ingress/portico-old']);
  });

  it('nginx with nginxRedirectKeepsPath off says so in the message', () => {
    const plan = desiredRouting(redirecting, { nginxRedirectKeepsPath: false });
    expect(plan.routed && plan.message).toMatch(
      /to https:\/\/example\.com\. Note: path and query are not kept/,
    );
  });

  it('traefik: a Middleware, then the Ingress that references it; the status caveat is in the message', () => {
    const plan = desiredRouting(
      domain({ service: { name: 'web' }, redirect: { to: 'example.com', statusCode: 302 } }),
      {
        ingressFlavor: 'traefik',
        http01Service,
      },
    );
    const objs = applied(plan);
    expect(objs.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual([
      'Service/portico-acme-http01',
      'Ingress/portico--acme-old',
      'Service/portico-redirect',
      'Middleware/portico-old-redirect',
      'Ingress/portico-old',
    ]);
    const mw = find(objs, 'Middleware', 'portico-old-redirect') as TraefikMiddleware | undefined;
    expect(mw?.spec.redirectRegex).toEqual({
      regex: '^https?://[^/]+(.*)$',
      replacement: 'https://example.com${1}',
      permanent: false,
    });
    const main = find(objs, 'Ingress', 'portico-old') as V1Ingress | undefined;
    expect(main?.metadata?.annotations).toEqual({
      'traefik.ingress.kubernetes.io/router.middlewares': 'shop-portico-old-redirect@kubernetescrd',
    });
    // The redirect rule names portico-redirect, not the project's Service: Traefik builds its router
    // whatever the project's endpoints (middleware.ts).
    expect(paths(main)).toEqual([
      {
        path: '/',
        pathType: 'Prefix',
        backend: { service: { name: 'portico-redirect', port: { number: 80 } } },
      },
    ]);
    expect(plan.routed && plan.caveats).toHaveLength(1);
    expect(plan.routed && plan.message).toMatch(/Note: Traefik .* 302 to GET and 307 to other methods/);
  });

  it('traefik without spec.service or the challenge Service: the redirect names the selector-less portico-redirect, no caveat about it', () => {
    const plan = desiredRouting(redirecting, { ingressFlavor: 'traefik' });
    const objs = applied(plan);
    expect(objs.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual([
      'Service/portico-redirect',
      'Middleware/portico-old-redirect',
      'Ingress/portico-old',
    ]);
    const service = find(objs, 'Service', 'portico-redirect') as V1Service | undefined;
    expect(service?.metadata?.annotations).toEqual({
      'traefik.ingress.kubernetes.io/service.nativelb': 'true',
    });
    expect(service?.metadata?.ownerReferences).toBeUndefined();
    expect(service?.metadata?.labels).toEqual({ 'app.kubernetes.io/managed-by': 'portico' });
    expect(service?.spec).toEqual({
      type: 'ClusterIP',
      ports: [{ name: 'http', port: 80, targetPort: 80, protocol: 'TCP' }],
    });
    expect(service?.spec?.selector).toBeUndefined();
    const main = find(objs, 'Ingress', 'portico-old') as V1Ingress | undefined;
    expect(paths(main)[0]?.backend.service).toEqual({ name: 'portico-redirect', port: { number: 80 } });
    expect(plan.routed && plan.caveats).toHaveLength(1);
    expect(plan.routed && plan.message).not.toMatch(/Service does not exist|set spec\.service/);
  });
});

describe('desiredRouting, gateway mode', () => {
  it('serves through an HTTPRoute with the challenge rule first', () => {
    const objs = applied(desiredRouting(serving, { ...gateway, http01Service }));
    const route = find(objs, 'HTTPRoute', 'portico-old') as HTTPRoute | undefined;
    expect(route?.apiVersion).toBe('gateway.networking.k8s.io/v1');
    expect(route?.spec).toEqual({
      parentRefs: [
        { name: 'public', namespace: 'infra' },
        { group: 'gateway.networking.k8s.io', kind: 'ListenerSet', name: 'portico-old' },
      ],
      hostnames: ['old.example.com'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: HTTP01_PATH_PREFIX } }],
          backendRefs: [{ name: 'portico-acme-http01', port: 8089 }],
        },
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          backendRefs: [{ name: 'web', port: 8080 }],
        },
      ],
    });
  });

  it('redirects with RequestRedirect and keeps the challenge path to the operator', () => {
    const plan = desiredRouting(domain({ redirect: { to: 'example.com', statusCode: 307 } }), {
      ...gateway,
      http01Service,
    });
    const route = find(applied(plan), 'HTTPRoute', 'portico-old') as HTTPRoute | undefined;
    expect(route?.spec.rules.map((r) => r.matches[0]?.path.value)).toEqual([HTTP01_PATH_PREFIX, '/']);
    expect(route?.spec.rules[1]?.filters?.[0]?.requestRedirect).toEqual({
      scheme: 'https',
      hostname: 'example.com',
      statusCode: 307,
    });
    expect(plan.routed && plan.message).toMatch(
      /^HTTPRoute portico-old on Gateway infra\/public answers old\.example\.com with 307/,
    );
  });

  it('attaches the certificate with a ListenerSet next to the Secret, before the route that names it', () => {
    const plan = desiredRouting(serving, { ...gateway, gatewayHttpsPort: 8443 });
    expect(plan.apply.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'ListenerSet/portico-old',
      'HTTPRoute/portico-old',
    ]);
    const set = find(applied(plan), 'ListenerSet', 'portico-old') as ListenerSet | undefined;
    expect(set?.apiVersion).toBe('gateway.networking.k8s.io/v1');
    expect(set?.metadata.namespace).toBe(serving.metadata.namespace);
    expect(set?.spec).toEqual({
      parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'public', namespace: 'infra' },
      listeners: [
        {
          name: 'https',
          hostname: 'old.example.com',
          port: 8443,
          protocol: 'HTTPS',
          tls: { mode: 'Terminate', certificateRefs: [{ group: '', kind: 'Secret', name: 'old-tls' }] },
        },
      ],
    });
    expect(plan.routed && plan.message).toContain(
      'TLS: ListenerSet portico-old attaches Secret old-tls to Gateway infra/public (HTTPS, port 8443).',
    );
    expect(plan.routed && plan.unservable).toBeUndefined();
  });

  it('attaches to the first Gateway only and says so when the routes have several', () => {
    const plan = desiredRouting(serving, {
      mode: 'gateway',
      gatewayParentRefs: [
        { name: 'public', namespace: 'infra', sectionName: 'http' },
        { name: 'public', namespace: 'infra', sectionName: 'https' },
        { name: 'internal', namespace: 'infra' },
      ],
    });
    const set = find(applied(plan), 'ListenerSet', 'portico-old') as ListenerSet | undefined;
    expect(set?.spec.parentRef.name).toBe('public');
    expect(plan.routed && plan.caveats).toEqual([
      "a ListenerSet has one parent, so the certificate is attached to Gateway infra/public only; HTTPS on infra/internal serves that Gateway's own certificates",
    ]);
  });

  it('writes the HTTPRoute without a ListenerSet where the API server serves none, and says it cannot serve HTTPS', () => {
    const plan = desiredRouting(serving, gateway, { listenerSetsServed: false });
    expect(plan.apply.map((o) => o.kind)).toEqual(['HTTPRoute']);
    const route = plan.apply[0] as HTTPRoute;
    expect(route.spec.parentRefs).toEqual([{ name: 'public', namespace: 'infra' }]);
    expect(plan).toMatchObject({ routed: true, unservable: { reason: 'ListenerSetUnsupported' } });
    expect(plan.routed && plan.unservable?.message).toContain(
      "Secret old-tls cannot be attached to Gateway infra/public: HTTPS for old.example.com would serve the Gateway's own certificate",
    );
  });

  it('needs the number of a named port', () => {
    const named = domain({ service: { name: 'web', port: 'http' } });
    const unknown = desiredRouting(named, gateway);
    expect(unknown).toMatchObject({ routed: false, reason: 'ServicePortNotFound', apply: [] });
    expect(!unknown.routed && unknown.message).toContain('Service web was not found');
    const lacking = desiredRouting(named, gateway, { servicePorts: [{ name: 'grpc', port: 9000 }] });
    expect(!lacking.routed && lacking.message).toContain('its ports are grpc (9000)');
    const objs = applied(desiredRouting(named, gateway, { servicePorts: [{ name: 'http', port: 80 }] }));
    const route = find(objs, 'HTTPRoute', 'portico-old') as HTTPRoute | undefined;
    expect(route?.spec.rules[0]?.backendRefs).toEqual([{ name: 'web', port: 80 }]);
  });
});

describe('the Service port (docs/customdomains.md, ServicePortNotFound)', () => {
  const ports = [{ name: 'http', port: 8080 }, { port: 9090 }];

  it('finds a port by name or by number', () => {
    expect(resolveServicePort({ name: 'web', port: 'http' }, ports)).toEqual({ number: 8080 });
    expect(resolveServicePort({ name: 'web', port: 9090 }, ports)).toEqual({ number: 9090 });
    expect(resolveServicePort({ name: 'web', port: 8080 }, ports)).toEqual({ number: 8080 });
    expect(resolveServicePort({ name: 'web' }, [{ port: 80 }])).toEqual({ number: 80 });
    // Not known: a number is taken as written, a name cannot be resolved.
    expect(resolveServicePort({ name: 'web', port: 81 }, undefined)).toEqual({ number: 81 });
  });

  it('names what the Service has when the port is missing', () => {
    const problem = (service: { name: string; port?: number | string }, of: typeof ports) => {
      const resolved = resolveServicePort(service, of);
      return 'problem' in resolved ? resolved.problem : undefined;
    };
    expect(problem({ name: 'web', port: 'https' }, ports)).toContain(
      'Service web has no port named "https" (its ports are http (8080), 9090)',
    );
    expect(problem({ name: 'web', port: 81 }, ports)).toContain(
      'has no port 81 (its ports are http (8080), 9090)',
    );
    expect(problem({ name: 'web' }, [])).toContain('has no port 80 (it has no ports)');
  });

  it('does not route an Ingress to a port the Service lacks, and routes it when the Service is unknown', () => {
    const missing = desiredRouting(
      domain({ service: { name: 'web', port: 'https' } }),
      {},
      { servicePorts: ports },
    );
    expect(missing).toMatchObject({ routed: false, reason: 'ServicePortNotFound', apply: [] });
    const present = desiredRouting(
      domain({ service: { name: 'web', port: 'http' } }),
      {},
      { servicePorts: ports },
    );
    expect(present.routed).toBe(true);
    const unknown = desiredRouting(domain({ service: { name: 'web', port: 'https' } }), {});
    expect(unknown.routed).toBe(true);
  });

  it('does not check the port of a redirect, whose Ingress backend is only formal', () => {
    const redirect = domain({ service: { name: 'web', port: 'gone' }, redirect: { to: 'example.com' } });
    expect(desiredRouting(redirect, {}, { servicePorts: ports }).routed).toBe(true);
  });
});

describe('desiredRouting, ingress mode, contour flavor (HTTPProxy)', () => {
  const contour: RoutingOptions = { ingressFlavor: 'contour', http01Service };
  const proxyOf = (plan: RoutingPlan): HTTPProxy => {
    const objs = applied(plan);
    expect(objs.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual([
      'Service/portico-acme-http01',
      'HTTPProxy/portico-old',
    ]);
    return objs[1] as HTTPProxy;
  };
  const challengeRoute = {
    conditions: [{ prefix: HTTP01_PATH_PREFIX }],
    services: [{ name: 'portico-acme-http01', port: 8089 }],
    permitInsecure: true,
  };

  it('serves through one HTTPProxy, no Ingress, with the labels and owner of every owned object', () => {
    const plan = desiredRouting(
      serving,
      { ...contour, ingressClassName: 'public' },
      { tlsSecretReady: true },
    );
    const proxy = proxyOf(plan);
    expect(proxy.apiVersion).toBe('projectcontour.io/v1');
    expect(proxy.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'portico',
      'portico.dev/customdomain': 'old',
    });
    expect(proxy.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'CustomDomain',
      name: 'old',
      uid: 'u-1',
    });
    expect(proxy.spec).toEqual({
      ingressClassName: 'public',
      virtualhost: { fqdn: 'old.example.com', tls: { secretName: 'old-tls' } },
      routes: [challengeRoute, { conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 8080 }] }],
    });
    expect(plan.routed && plan.message).toBe(
      'HTTPProxy portico-old (Contour) routes old.example.com to Service web:8080. TLS from Secret old-tls. /.well-known/acme-challenge/ goes to the operator, over plain HTTP too.',
    );
  });

  it('names the TLS Secret only once it holds a certificate, and says so until then', () => {
    const plan = desiredRouting(serving, contour);
    expect(proxyOf(plan).spec.virtualhost).toEqual({ fqdn: 'old.example.com' });
    expect(plan.routed && plan.message).toContain(
      'TLS from Secret old-tls is added once it holds the certificate (Contour refuses an HTTPProxy whose TLS Secret is missing).',
    );
  });

  it('redirects with requestRedirectPolicy for each status, on plain HTTP too, keeping the challenge route', () => {
    for (const statusCode of [301, 302, 307, 308] as const) {
      const plan = desiredRouting(domain({ redirect: { to: 'Example.com.', statusCode } }), contour, {
        tlsSecretReady: true,
      });
      expect(proxyOf(plan).spec.routes).toEqual([
        challengeRoute,
        {
          conditions: [{ prefix: '/' }],
          permitInsecure: true,
          requestRedirectPolicy: { scheme: 'https', hostname: 'example.com', statusCode },
        },
      ]);
      expect(plan.routed && plan.caveats).toEqual([]);
      expect(plan.routed && plan.message).toContain(
        `HTTPProxy portico-old (Contour) answers old.example.com with ${statusCode} `,
      );
      expect(plan.routed && plan.message).toContain('to https://example.com, keeping path and query.');
    }
  });

  it('without the challenge Service: the HTTPProxy alone, no challenge route', () => {
    const objs = applied(desiredRouting(redirecting, { ingressFlavor: 'contour' }));
    expect(objs.map((o) => o.kind)).toEqual(['HTTPProxy']);
    expect((objs[0] as HTTPProxy).spec.routes.map((r) => r.conditions[0]?.prefix)).toEqual(['/']);
  });

  it('resolves a named port to its number, and does not route a port the Service lacks', () => {
    const named = domain({ service: { name: 'web', port: 'http' } });
    const ports = [{ name: 'http', port: 8080 }];
    const proxy = proxyOf(desiredRouting(named, contour, { servicePorts: ports }));
    expect(proxy.spec.routes[1]?.services).toEqual([{ name: 'web', port: 8080 }]);
    const missing = desiredRouting(named, contour, { servicePorts: [{ name: 'admin', port: 9090 }] });
    expect(missing).toMatchObject({ routed: false, reason: 'ServicePortNotFound', apply: [] });
    expect(missing.routed ? '' : missing.message).toContain('its ports are admin (9090)');
    const unknown = desiredRouting(named, contour);
    expect(unknown).toMatchObject({ routed: false, reason: 'ServicePortNotFound' });
  });

  it('writes nothing, and says why, where the API server serves no HTTPProxy', () => {
    for (const d of [serving, redirecting]) {
      const plan = desiredRouting(d, contour, { flavorKindServed: false });
      expect(plan).toMatchObject({ routed: false, reason: 'HTTPProxyUnsupported', apply: [] });
      expect(plan.routed ? '' : plan.message).toContain('does not serve HTTPProxy (projectcontour.io/v1)');
    }
    // Other flavors do not care.
    expect(desiredRouting(serving, { http01Service }, { flavorKindServed: false }).routed).toBe(true);
  });

  it('is not the flavor in gateway mode', () => {
    const objs = applied(desiredRouting(serving, { ...gateway, ingressFlavor: 'contour' }));
    expect(objs.map((o) => o.kind)).toEqual(['ListenerSet', 'HTTPRoute']);
  });
});

describe('owned and stale objects', () => {
  it('lists every kind and name Portico could create for the domain, whatever the mode', () => {
    expect(ownedRoutingObjects(serving).map((h) => `${h.apiVersion} ${h.kind}/${h.metadata.name}`)).toEqual([
      'networking.k8s.io/v1 Ingress/portico-old',
      'networking.k8s.io/v1 Ingress/portico--acme-old',
      'networking.k8s.io/v1 Ingress/portico-old-acme',
      'projectcontour.io/v1 HTTPProxy/portico-old',
      'traefik.io/v1alpha1 Middleware/portico-old-redirect',
      'gateway.networking.k8s.io/v1 HTTPRoute/portico-old',
      'gateway.networking.k8s.io/v1 ListenerSet/portico-old',
    ]);
  });

  it('marks as stale what the current plan does not apply, never the shared challenge Service', () => {
    const stale = (plan: RoutingPlan) => staleRoutingObjects(plan).map((h) => `${h.kind}/${h.metadata.name}`);
    expect(stale(desiredRouting(serving, { http01Service }))).toEqual([
      'Ingress/portico--acme-old',
      'Ingress/portico-old-acme',
      'HTTPProxy/portico-old',
      'Middleware/portico-old-redirect',
      'HTTPRoute/portico-old',
      'ListenerSet/portico-old',
    ]);
    expect(stale(desiredRouting(redirecting, { ingressFlavor: 'traefik', http01Service }))).toEqual([
      'Ingress/portico-old-acme',
      'HTTPProxy/portico-old',
      'HTTPRoute/portico-old',
      'ListenerSet/portico-old',
    ]);
    expect(stale(desiredRouting(redirecting, { ...gateway, http01Service }))).toEqual([
      'Ingress/portico-old',
      'Ingress/portico--acme-old',
      'Ingress/portico-old-acme',
      'HTTPProxy/portico-old',
      'Middleware/portico-old-redirect',
    ]);
    expect(stale(desiredRouting(redirecting, { ingressFlavor: 'contour', http01Service }))).toEqual([
      'Ingress/portico-old',
      'Ingress/portico--acme-old',
      'Ingress/portico-old-acme',
      'Middleware/portico-old-redirect',
      'HTTPRoute/portico-old',
      'ListenerSet/portico-old',
    ]);
    const none = desiredRouting(domain({}), {});
    expect(none).toMatchObject({ routed: false, reason: 'NoBackend' });
    expect(stale(none)).toHaveLength(7);
  });
});

describe('a redirect whose target is refused (redirect.ts redirectRouting)', () => {
  const target = (hostname: string, ready: 'True' | 'False', name = 'primary'): CustomDomain => ({
    ...domain({ hostname, service: { name: 'web' } }, name),
    status: {
      conditions: [
        {
          type: 'Ready',
          status: ready,
          reason: ready === 'True' ? 'Live' : 'CertificatePending',
          message: '',
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ],
    },
  });
  const lookup = (domains: CustomDomain[], holder?: { namespace: string; name: string }) => ({
    redirectTarget: { domainsInNamespace: domains, holderOf: () => holder },
  });
  const kinds = (plan: RoutingPlan) => plan.apply.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`);

  it('is not routed with the verdict reason; ingress mode keeps only the challenge Ingress', () => {
    const plan = desiredRouting(redirecting, { http01Service }, lookup([]));
    expect(plan).toMatchObject({ routed: false, reason: 'RedirectTargetNotFound' });
    expect(plan.routed ? '' : plan.message).toContain('No CustomDomain in this project (namespace shop)');
    expect(kinds(plan)).toEqual(['Service/portico-acme-http01', 'Ingress/portico--acme-old']);
    expect(staleRoutingObjects(plan).map((h) => `${h.kind}/${h.metadata.name}`)).toContain(
      'Ingress/portico-old',
    );
  });

  it('gateway mode keeps an HTTPRoute with the challenge rule alone and no ListenerSet', () => {
    const plan = desiredRouting(
      redirecting,
      { ...gateway, http01Service },
      lookup([target('example.com', 'False')]),
    );
    expect(plan).toMatchObject({ routed: false, reason: 'RedirectTargetNotServing' });
    expect(kinds(plan)).toEqual(['Service/portico-acme-http01', 'HTTPRoute/portico-old']);
    const route = plan.apply[1] as HTTPRoute;
    expect(route.spec.rules).toHaveLength(1);
    expect(route.spec.rules[0]?.matches?.[0]?.path?.value).toBe(HTTP01_PATH_PREFIX);
    expect(route.spec.parentRefs.map((p) => p.name)).toEqual(['public']);
  });

  it('applies nothing without a challenge Service (the sandbox)', () => {
    const plan = desiredRouting(redirecting, {}, lookup([], { namespace: 'other', name: 'x' }));
    expect(plan).toMatchObject({ routed: false, reason: 'RedirectTargetOtherProject', apply: [] });
  });

  it('routes the redirect as before once its target serves in the project', () => {
    const options: RoutingOptions = { http01Service };
    const plan = desiredRouting(redirecting, options, lookup([target('example.com', 'True')]));
    expect(plan).toEqual(desiredRouting(redirecting, options));
    expect(plan.routed).toBe(true);
  });

  it('leaves a serving domain alone', () => {
    expect(desiredRouting(serving, {}, lookup([])).routed).toBe(true);
  });

  it('contour: keeps an HTTPProxy with the challenge route alone, over plain HTTP, without TLS', () => {
    const plan = desiredRouting(
      redirecting,
      { ingressFlavor: 'contour', http01Service },
      { ...lookup([target('example.com', 'False')]), tlsSecretReady: true },
    );
    expect(plan).toMatchObject({ routed: false, reason: 'RedirectTargetNotServing' });
    expect(kinds(plan)).toEqual(['Service/portico-acme-http01', 'HTTPProxy/portico-old']);
    expect((plan.apply[1] as HTTPProxy).spec).toEqual({
      virtualhost: { fqdn: 'old.example.com' },
      routes: [
        {
          conditions: [{ prefix: HTTP01_PATH_PREFIX }],
          services: [{ name: 'portico-acme-http01', port: 8089 }],
          permitInsecure: true,
        },
      ],
    });
  });
});

describe('a flavor the declared data plane ignores (data-planes.ts, UnsupportedByDataPlane)', () => {
  it('does not route a redirect that Contour would serve instead, keeping only the challenge Ingress', () => {
    const plan = desiredRouting(redirecting, { dataPlane: 'contour', ingressFlavor: 'nginx', http01Service });
    expect(plan).toMatchObject({ routed: false, reason: 'UnsupportedByDataPlane' });
    expect(plan.routed ? '' : plan.message).toContain(
      'Start the operator with --routing-mode ingress --ingress-flavor contour',
    );
    expect(plan.apply.map((o) => `${o.kind}/${o.metadata?.name ?? ''}`)).toEqual([
      'Service/portico-acme-http01',
      'Ingress/portico--acme-old',
    ]);
    // The redirect Ingress, which Contour would proxy to its backend, is among the stale objects.
    expect(staleRoutingObjects(plan).map((h) => `${h.kind}/${h.metadata.name}`)).toContain(
      'Ingress/portico-old',
    );
  });

  it('routes a serving domain where the data plane serves the flavor but ignores its redirects', () => {
    const plan = desiredRouting(serving, { dataPlane: 'contour', ingressFlavor: 'nginx' });
    expect(plan.routed).toBe(true);
  });

  it('writes nothing for a flavor the data plane does not read at all', () => {
    for (const d of [serving, redirecting]) {
      const plan = desiredRouting(d, { dataPlane: 'envoy-gateway', ingressFlavor: 'nginx', http01Service });
      expect(plan).toMatchObject({ routed: false, reason: 'UnsupportedByDataPlane', apply: [] });
      expect(plan.routed ? '' : plan.message).toContain('--routing-mode gateway');
    }
  });

  it("routes each data plane's working flavor as without a data plane", () => {
    const cases: [DataPlane, RoutingOptions][] = [
      ['contour', { ingressFlavor: 'contour' }],
      ['traefik', { ingressFlavor: 'traefik', http01Service }],
      ['ingress-nginx', { ingressFlavor: 'nginx' }],
      ['envoy-gateway', gateway],
    ];
    for (const [dataPlane, without] of cases) {
      const options = { ...without, dataPlane };
      expect(desiredRouting(redirecting, options)).toEqual(desiredRouting(redirecting, without));
      expect(desiredRouting(serving, options)).toEqual(desiredRouting(serving, without));
    }
  });

  it('comes before the checks of the redirect target and of the HTTPProxy kind', () => {
    const lookups = {
      flavorKindServed: false,
      redirectTarget: { domainsInNamespace: [], holderOf: () => undefined },
    };
    expect(
      desiredRouting(redirecting, { dataPlane: 'traefik', ingressFlavor: 'contour' }, lookups),
    ).toMatchObject({
      reason: 'UnsupportedByDataPlane',
    });
    expect(desiredRouting(redirecting, { dataPlane: 'contour' }, lookups)).toMatchObject({
      reason: 'UnsupportedByDataPlane',
    });
  });
});
