import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../api/customdomain.js';
import {
  desiredChallengeIngress,
  desiredHttp01Service,
  desiredIngress,
  desiredRedirectIngress,
  HTTP01_PATH_PREFIX,
  redirectBackend,
} from './ingress.js';

const domain: CustomDomain = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'CustomDomain',
  metadata: { name: 'www', namespace: 'shop', uid: 'u-1' },
  spec: { hostname: 'www.example.com', service: { name: 'web', port: 'http' } },
};

describe('desiredIngress', () => {
  it('serves the hostname from the service over TLS from the domain Secret', () => {
    const ing = desiredIngress(domain, { ingressClassName: 'nginx' });
    expect(ing?.metadata?.name).toBe('portico-www');
    expect(ing?.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'CustomDomain',
      uid: 'u-1',
      controller: true,
    });
    expect(ing?.spec?.ingressClassName).toBe('nginx');
    expect(ing?.spec?.tls).toEqual([{ hosts: ['www.example.com'], secretName: 'www-tls' }]);
    expect(ing?.spec?.rules?.[0]?.http?.paths).toEqual([
      { path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { name: 'http' } } } },
    ]);
  });

  it('routes the challenge path to the operator when it is configured', () => {
    const options = { http01Service: { fqdn: 'portico.portico-system.svc.cluster.local', port: 8089 } };
    const paths = desiredIngress(domain, options)?.spec?.rules?.[0]?.http?.paths ?? [];
    expect(paths[0]?.path).toBe(HTTP01_PATH_PREFIX);
    expect(paths[0]?.backend.service?.port).toEqual({ number: 8089 });
    const svc = desiredHttp01Service(domain, options);
    expect(svc?.spec).toMatchObject({ type: 'ExternalName', externalName: options.http01Service.fqdn });
    expect(svc?.metadata?.ownerReferences).toBeUndefined();
  });

  it('defaults the port to 80 and leaves the class unset', () => {
    const ing = desiredIngress(
      { ...domain, spec: { hostname: 'a.example.com', service: { name: 'web' } } },
      {},
    );
    expect(ing?.spec?.ingressClassName).toBeUndefined();
    expect(ing?.spec?.rules?.[0]?.http?.paths[0]?.backend.service?.port).toEqual({ number: 80 });
  });
});

describe('redirect Ingresses', () => {
  const redirect: CustomDomain = {
    ...domain,
    spec: { hostname: 'old.example.com', redirect: { to: 'example.com' } },
  };

  it('puts only the challenge path, without TLS, in the challenge Ingress', () => {
    const options = { http01Service: { fqdn: 'portico.portico-system.svc.cluster.local', port: 8089 } };
    const acme = desiredChallengeIngress(redirect, options);
    expect(acme?.metadata?.name).toBe('portico--acme-www');
    expect(acme?.spec?.tls).toBeUndefined();
    expect(acme?.spec?.rules?.[0]?.http?.paths.map((p) => p.path)).toEqual([HTTP01_PATH_PREFIX]);
    expect(desiredChallengeIngress(redirect, {})).toBeUndefined();
  });

  it('names the best available backend for the redirect rule', () => {
    expect(redirectBackend(redirect, {}).source).toBe('placeholder');
    expect(redirectBackend(redirect, { http01Service: { fqdn: 'x.svc', port: 8089 } })).toEqual({
      name: 'portico-acme-http01',
      port: 8089,
      source: 'challenge',
    });
    expect(
      redirectBackend({ ...redirect, spec: { ...redirect.spec, service: { name: 'web' } } }, {}).name,
    ).toBe('web');
  });

  it('carries the annotations and TLS on the redirect Ingress', () => {
    const ing = desiredRedirectIngress(redirect, { ingressClassName: 'nginx' }, { a: 'b' });
    expect(ing.metadata?.annotations).toEqual({ a: 'b' });
    expect(ing.metadata?.labels?.['portico.dev/customdomain']).toBe('www');
    expect(ing.spec?.tls).toEqual([{ hosts: ['old.example.com'], secretName: 'www-tls' }]);
    expect(ing.spec?.ingressClassName).toBe('nginx');
  });
});
