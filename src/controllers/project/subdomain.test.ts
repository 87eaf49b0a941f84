import { describe, expect, it } from 'vitest';
import type { Project } from '../../api/project.js';
import type { HTTPProxy } from '../../data-planes/contour/httpproxy.js';
import { planSubdomain, subdomainHolder, subdomainProxyName, type SubdomainFacts } from './subdomain.js';

const HOST = 'blog.apps.example';
const SECRET = 'portico-system/portico-apps-domain-tls';

function project(domains: Partial<Project['spec']['domains']> = {}, port: number | string = 80): Project {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'Project',
    metadata: { name: 'site', namespace: 'blog', uid: 'uid-1', creationTimestamp: new Date('2026-01-01') },
    spec: { service: { name: 'web', port }, domains: { primary: 'www.blog.example', ...domains } },
  };
}

function facts(over: Partial<SubdomainFacts> = {}): SubdomainFacts {
  return {
    hostname: HOST,
    routingSupported: true,
    readyEndpoints: 1,
    servicePorts: [{ name: 'http', port: 8080 }],
    current: undefined,
    certificate: { ready: true, message: 'valid', secretReference: SECRET },
    servingPrimary: undefined,
    ...over,
  };
}

/** The HTTPProxy as Contour leaves it after judging `proxy`: `valid` for its generation. */
function judged(proxy: HTTPProxy, currentStatus = 'valid'): HTTPProxy {
  return {
    ...proxy,
    metadata: { ...proxy.metadata, generation: 2 },
    status: {
      currentStatus,
      description: currentStatus === 'valid' ? 'Valid HTTPProxy' : 'Secret not found',
      conditions: [
        { type: 'Valid', status: currentStatus === 'valid' ? 'True' : 'False', observedGeneration: 2 },
      ],
    },
  } as HTTPProxy;
}

describe('planSubdomain', () => {
  it('serves the Service with the wildcard Secret of the operator namespace once Contour took it', () => {
    const first = planSubdomain(project(), facts());
    expect(first.proxy?.metadata.name).toBe(subdomainProxyName(project()));
    expect(first.proxy?.spec).toEqual({
      virtualhost: { fqdn: HOST, tls: { secretName: SECRET } },
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
    });
    expect(first.proxy?.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'Project',
      uid: 'uid-1',
      controller: true,
    });
    expect(first.delegated).toBe(true);
    expect(first.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted', answer: 'Content' });

    const second = planSubdomain(project(), facts({ current: judged(first.proxy as HTTPProxy) }));
    expect(second.status).toMatchObject({
      hostname: HOST,
      serving: 'True',
      reason: 'Serving',
      answer: 'Content',
    });
  });

  it('reports Contour refusing the route with its description', () => {
    const proxy = planSubdomain(project(), facts()).proxy as HTTPProxy;
    const plan = planSubdomain(project(), facts({ current: judged(proxy, 'invalid') }));
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'RouteNotAccepted' });
    expect(plan.status.message).toContain('Secret not found');
  });

  it('routes over HTTP only, naming no Secret, until the wildcard certificate is stored', () => {
    const plan = planSubdomain(
      project(),
      facts({ certificate: { ready: false, message: 'the order failed', secretReference: SECRET } }),
    );
    expect(plan.proxy?.spec.virtualhost).toEqual({ fqdn: HOST });
    expect(plan.delegated).toBe(false);
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'WildcardCertificatePending' });
    expect(plan.status.message).toContain('the order failed');
  });

  it('waits for the first deploy, and keeps its route through a scale to zero afterwards', () => {
    const waiting = planSubdomain(project(), facts({ readyEndpoints: 0 }));
    expect(waiting.proxy).toBeUndefined();
    expect(waiting.status).toMatchObject({ serving: 'False', reason: 'NotDeployed' });

    const routed = planSubdomain(project(), facts()).proxy as HTTPProxy;
    const scaledToZero = planSubdomain(project(), facts({ readyEndpoints: 0, current: judged(routed) }));
    expect(scaledToZero.proxy).toBeDefined();
    expect(scaledToZero.status.serving).toBe('True');
  });

  it('does not count an HTTPProxy another object controls as an earlier deploy', () => {
    const routed = planSubdomain(project(), facts()).proxy as HTTPProxy;
    const forged = {
      ...routed,
      metadata: {
        ...routed.metadata,
        ownerReferences: [{ ...routed.metadata.ownerReferences?.[0], uid: 'other' }],
      },
    } as HTTPProxy;
    expect(planSubdomain(project(), facts({ readyEndpoints: 0, current: forged })).status.reason).toBe(
      'NotDeployed',
    );
  });

  it('Supplement (the default) serves the content while the primary serves', () => {
    const plan = planSubdomain(project(), facts({ servingPrimary: 'www.blog.example' }));
    expect(plan.proxy?.spec.routes[0]?.services).toEqual([{ name: 'web', port: 80 }]);
    expect(plan.status.answer).toBe('Content');
  });

  it('Replace answers a 301 to the primary once it serves, and the content until then', () => {
    const before = planSubdomain(project({ generatedSubdomain: 'Replace' }), facts());
    expect(before.status.answer).toBe('Content');
    expect(before.proxy?.spec.routes[0]?.services).toEqual([{ name: 'web', port: 80 }]);

    const after = planSubdomain(
      project({ generatedSubdomain: 'Replace' }),
      facts({ servingPrimary: 'www.blog.example' }),
    );
    expect(after.proxy?.spec.routes).toEqual([
      {
        conditions: [{ prefix: '/' }],
        permitInsecure: true,
        requestRedirectPolicy: { scheme: 'https', hostname: 'www.blog.example', statusCode: 301 },
      },
    ]);
    expect(after.status).toMatchObject({ answer: 'Redirect', redirectTo: 'www.blog.example' });
  });

  it('resolves a named Service port, and reports one the Service does not have', () => {
    expect(planSubdomain(project({}, 'http'), facts()).proxy?.spec.routes[0]?.services).toEqual([
      { name: 'web', port: 8080 },
    ]);
    const missing = planSubdomain(project({}, 'grpc'), facts());
    expect(missing.proxy).toBeUndefined();
    expect(missing.status.message).toBe('Service web has no port named grpc');
  });

  it('routes nothing for a Project whose subdomain another Project holds, and says which', () => {
    const plan = planSubdomain(project(), facts({ heldBy: { namespace: 'blog', name: 'first' } }));
    expect(plan.proxy).toBeUndefined();
    expect(plan.status).toMatchObject({ serving: 'False', reason: 'SubdomainConflict' });
    expect(plan.status.message).toContain('Project first');
  });

  it('routes nothing where the operator writes no HTTPProxy', () => {
    const plan = planSubdomain(project(), facts({ routingSupported: false }));
    expect(plan.proxy).toBeUndefined();
    expect(plan.status.reason).toBe('RoutingFlavorUnsupported');
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
