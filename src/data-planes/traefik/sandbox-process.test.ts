import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

import { controllerOptions } from '../../controller/config-flags.js';
import {
  backendEndpointSlice,
  examplesWithBackend,
  traefikArgs,
  traefikOperatorFlags,
} from './sandbox-process.js';

/** The `--name=value` flags of `args`, by name. */
function flags(args: readonly string[]): Map<string, string> {
  return new Map(
    args.map((a) => {
      const at = a.indexOf('=');
      return [a.slice(0, at), a.slice(at + 1)] as [string, string];
    }),
  );
}

describe('traefikArgs', () => {
  it('binds every entrypoint on loopback at the ports given, and phones nowhere', () => {
    const f = flags(traefikArgs({ web: 1001, websecure: 1002, ping: 1003 }));
    expect(f.get('--entryPoints.web.address')).toBe('127.0.0.1:1001');
    expect(f.get('--entryPoints.websecure.address')).toBe('127.0.0.1:1002');
    expect(f.get('--entryPoints.websecure.http.tls')).toBe('true');
    expect(f.get('--entryPoints.traefik.address')).toBe('127.0.0.1:1003');
    expect(f.get('--global.checkNewVersion')).toBe('false');
    expect(f.get('--global.sendAnonymousUsage')).toBe('false');
  });

  it('serves Ingresses of its class, publishes 127.0.0.1 on them, and reads Middlewares', () => {
    const f = flags(traefikArgs({ web: 1, websecure: 2, ping: 3 }, 'mine'));
    expect(f.get('--providers.kubernetesIngress.ingressClass')).toBe('mine');
    expect(f.get('--providers.kubernetesIngress.ingressEndpoint.ip')).toBe('127.0.0.1');
    expect(f.get('--providers.kubernetesCRD')).toBe('true');
  });

  it('redirects plain HTTP on web to HTTPS on websecure only when asked (httpsRedirect)', () => {
    const plain = flags(traefikArgs({ web: 1, websecure: 2, ping: 3 }));
    expect([...plain.keys()].filter((k) => k.includes('redirections'))).toEqual([]);
    const f = flags(traefikArgs({ web: 1, websecure: 2, ping: 3 }, 'mine', { httpsRedirect: true }));
    expect(f.get('--entryPoints.web.http.redirections.entryPoint.to')).toBe('websecure');
    expect(f.get('--entryPoints.web.http.redirections.entryPoint.scheme')).toBe('https');
  });
});

describe('traefikOperatorFlags', () => {
  it("names only flags the operator has, with the traefik flavor and Traefik's class", () => {
    const given = traefikOperatorFlags('mine', '127.0.0.1:8443');
    for (const flag of Object.keys(given)) expect(Object.keys(controllerOptions)).toContain(flag.slice(2));
    expect(given['--ingress-flavor']).toBe('traefik');
    expect(given['--data-plane']).toBe('traefik');
    expect(given['--ingress-class']).toBe('mine');
    expect(given['--serving-check-address']).toBe('127.0.0.1:8443');
    expect(traefikOperatorFlags('mine')).not.toHaveProperty('--serving-check-address');
  });
});

describe('examplesWithBackend', () => {
  it('points the sandbox-managed EndpointSlice at the backend, keeping its name, Service and port name; leaves the rest', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'portico-examples-'));
    await writeFile(
      path.join(dir, '01-p.yaml'),
      [
        'apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}',
        'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: shop-web-1\n  namespace: shop\n' +
          '  labels: {kubernetes.io/service-name: shop-web, endpointslice.kubernetes.io/managed-by: sandbox.portico.dev}\n' +
          'addressType: IPv4\nports: [{name: web, port: 8080, protocol: TCP}]\nendpoints: [{addresses: [10.244.0.10]}]',
        'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: other\n  namespace: shop\n' +
          '  labels: {kubernetes.io/service-name: x}\naddressType: IPv4\nendpoints: []',
      ].join('\n---\n'),
    );
    const out = path.join(dir, 'out');
    const result = await examplesWithBackend(dir, out, 4242);
    expect(result.projects).toEqual(['shop']);
    const docs = parseAllDocuments(await readFile(path.join(out, '01-p.yaml'), 'utf8')).map(
      (d) => d.toJS() as Record<string, unknown>,
    );
    expect(docs).toHaveLength(3);
    expect(docs[0]).toEqual({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } });
    expect(docs[1]).toEqual(backendEndpointSlice('shop', 'shop-web', 'shop-web-1', 4242, 'web'));
    expect(docs[2]?.['metadata']).toEqual({
      name: 'other',
      namespace: 'shop',
      labels: { 'kubernetes.io/service-name': 'x' },
    });
  });
});

describe('backendEndpointSlice', () => {
  it('is an FQDN slice whose one ready address is 127.0.0.1, at the port given', () => {
    const slice = backendEndpointSlice('ns', 'web', 'web-1', 8080);
    expect(slice['addressType']).toBe('FQDN');
    expect(slice['endpoints']).toEqual([{ addresses: ['127.0.0.1'], conditions: { ready: true } }]);
    expect(slice['ports']).toEqual([{ name: 'http', port: 8080, protocol: 'TCP' }]);
  });
});
