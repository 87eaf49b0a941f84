import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  conflictMessage,
  controllerOwnerUid,
  ForeignRouteIndex,
  hostnamesOf,
  MAX_NAMED_ROUTES,
  namedRoutes,
  newRoutes,
  ownerKey,
  routeId,
  routeClassOf,
  routeNamespace,
  servedWithPortico,
  slimForeignRoute,
} from './foreign-routes.js';

function obj(spec: unknown, name = 'hijack', namespace = 'other'): KubernetesObject {
  return { metadata: { name, namespace }, spec } as KubernetesObject;
}

describe('hostnamesOf', () => {
  it('reads an Ingress’s rule hosts and TLS hosts, normalized, without wildcards', () => {
    const ing = obj({
      rules: [{ host: 'WWW.Example.com.' }, { host: '*.example.com' }, {}],
      tls: [{ hosts: ['tls.example.com', 'www.example.com'] }],
    });
    expect([...hostnamesOf('Ingress', ing)].sort()).toEqual(['tls.example.com', 'www.example.com']);
  });

  it('reads an HTTPProxy’s fqdn and an HTTPRoute’s hostnames', () => {
    expect([...hostnamesOf('HTTPProxy', obj({ virtualhost: { fqdn: 'a.example.com' } }))]).toEqual([
      'a.example.com',
    ]);
    expect([...hostnamesOf('HTTPRoute', obj({ hostnames: ['b.example.com', 'c.example.com'] }))]).toEqual([
      'b.example.com',
      'c.example.com',
    ]);
  });

  it('skips malformed fields instead of throwing', () => {
    expect(
      hostnamesOf('Ingress', obj({ rules: 'x', tls: [null, { hosts: [3, 'ok.example.com'] }] })),
    ).toEqual(new Set(['ok.example.com']));
    expect(hostnamesOf('HTTPProxy', obj(null)).size).toBe(0);
    expect(hostnamesOf('HTTPRoute', obj({ hostnames: { a: 1 } })).size).toBe(0);
    expect(hostnamesOf('Ingress', { metadata: {} }).size).toBe(0);
  });
});

describe('ForeignRouteIndex', () => {
  it('finds the objects of a hostname and reports the hostnames an event changed', () => {
    const index = new ForeignRouteIndex();
    expect(index.set('Ingress b/x', new Set(['www.example.com']))).toEqual(['www.example.com']);
    expect(index.set('Ingress a/y', new Set(['www.example.com', 'api.example.com']))).toEqual([
      'www.example.com',
      'api.example.com',
    ]);
    expect(index.routesOf('WWW.example.com')).toEqual(['Ingress a/y', 'Ingress b/x']);
    // An update that moves a/y off www: only www changed.
    expect(index.set('Ingress a/y', new Set(['api.example.com']))).toEqual(['www.example.com']);
    expect(index.routesOf('www.example.com')).toEqual(['Ingress b/x']);
    expect(index.set('Ingress a/y', new Set(['api.example.com']))).toEqual([]);
    expect(index.delete('Ingress b/x')).toEqual(['www.example.com']);
    expect(index.routesOf('www.example.com')).toEqual([]);
    expect(index.size).toBe(1);
    expect(index.delete('Ingress a/y')).toEqual(['api.example.com']);
    expect(index.size).toBe(0);
    expect(index.delete('Ingress never/seen')).toEqual([]);
  });
});

/** An object with the ownerReferences `refs`. */
function ownedBy(refs: unknown, namespace = 'other'): KubernetesObject {
  return { metadata: { name: 'r', namespace, ownerReferences: refs } } as KubernetesObject;
}
const cdRef = (uid: string, controller = true) => ({
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'CustomDomain',
  name: 'www',
  uid,
  controller,
});

describe('controllerOwnerUid', () => {
  it('reads the uid of a CustomDomain controller reference only', () => {
    expect(controllerOwnerUid(ownedBy([cdRef('u1')]))).toBe('u1');
    expect(controllerOwnerUid(ownedBy([{ ...cdRef('u1'), apiVersion: 'portico.dev/v1' }]))).toBe('u1');
    expect(controllerOwnerUid(ownedBy([cdRef('u1', false)]))).toBeUndefined();
    expect(controllerOwnerUid(ownedBy([{ ...cdRef('u1'), kind: 'Deployment' }]))).toBeUndefined();
    expect(
      controllerOwnerUid(ownedBy([{ ...cdRef('u1'), apiVersion: 'evil.dev/v1alpha1' }])),
    ).toBeUndefined();
    expect(controllerOwnerUid(ownedBy([{ ...cdRef(''), uid: '' }]))).toBeUndefined();
    expect(controllerOwnerUid(ownedBy('not a list'))).toBeUndefined();
    expect(controllerOwnerUid(ownedBy([null, 3, cdRef('u2')]))).toBe('u2');
    expect(controllerOwnerUid({ metadata: {} })).toBeUndefined();
  });
});

describe('ForeignRouteIndex by owner (what only Portico writes, never a label)', () => {
  const host = 'www.victim.example';
  const victim = ownerKey('victim', 'uid-victim');

  it.each([
    [
      'the holder’s own route (its controller reference, in its namespace)',
      'Ingress victim/portico-www',
      victim,
      false,
    ],
    ['a route with no owner (labelled managed-by portico or not)', 'Ingress hijacker/login', undefined, true],
    [
      'a route whose controller reference names the tenant’s own CustomDomain',
      'HTTPProxy hijacker/proxy',
      ownerKey('hijacker', 'uid-attacker-cd'),
      true,
    ],
    [
      'a route in another namespace whose reference names the holder’s uid (references are namespace-local)',
      'Ingress hijacker/copy',
      ownerKey('hijacker', 'uid-victim'),
      true,
    ],
  ])('%s: foreign=%s', (_case, id, owner, foreign) => {
    const index = new ForeignRouteIndex();
    index.set(id, new Set([host]), owner);
    expect(index.routesOf(host, new Set([victim]))).toEqual(foreign ? [id] : []);
  });

  it('reports the hostnames it keeps when only its owner changes, and forgets the owner on delete', () => {
    const index = new ForeignRouteIndex();
    expect(index.set('Ingress victim/r', new Set([host]), victim)).toEqual([host]);
    expect(index.set('Ingress victim/r', new Set([host]), victim)).toEqual([]);
    expect(index.set('Ingress victim/r', new Set([host]))).toEqual([host]);
    expect(index.routesOf(host, new Set([victim]))).toEqual(['Ingress victim/r']);
    expect(index.delete('Ingress victim/r')).toEqual([host]);
    expect(index.set('Ingress victim/r', new Set([host]))).toEqual([host]);
    expect(index.routesOf(host, new Set([victim]))).toEqual(['Ingress victim/r']);
  });
});

describe('the Conflicted message', () => {
  it('names each object as Kind namespace/name and reads them back', () => {
    const routes = [routeId('Ingress', obj({})), 'HTTPProxy shop/www'];
    const message = conflictMessage('www.example.com', routes);
    expect(message).toContain('Ingress other/hijack; HTTPProxy shop/www.');
    expect(namedRoutes(message)).toEqual(new Set(routes));
    expect(namedRoutes(undefined).size).toBe(0);
    expect(namedRoutes('No route Portico does not own names it.').size).toBe(0);
  });

  it('names at most MAX_NAMED_ROUTES objects and counts the rest', () => {
    const routes = Array.from(
      { length: MAX_NAMED_ROUTES + 3 },
      (_, i) => `Ingress ns/r${String(i).padStart(2, '0')}`,
    );
    const message = conflictMessage('www.example.com', routes);
    expect(message).toContain('; and 3 more.');
    expect(namedRoutes(message).size).toBe(MAX_NAMED_ROUTES);
  });

  it('gives an Event only to objects the previous message did not name', () => {
    const before = conflictMessage('www.example.com', ['Ingress other/a']);
    expect(newRoutes(before, ['Ingress other/a', 'Ingress other/ab'])).toEqual(['Ingress other/ab']);
    expect(newRoutes(before, ['Ingress other/a'])).toEqual([]);
    expect(newRoutes(undefined, ['Ingress other/a'])).toEqual(['Ingress other/a']);
  });
});

describe('slimForeignRoute', () => {
  it('keeps only the name and the exact hostnames, read back the same, and is idempotent', () => {
    const ing = obj({
      rules: [{ host: 'www.example.com', http: { paths: [{ path: '/' }] } }],
      tls: [{ hosts: ['tls.example.com'], secretName: 's' }],
    });
    ing.metadata = { ...ing.metadata, labels: { a: 'b' }, resourceVersion: '7' };
    slimForeignRoute('Ingress', ing);
    expect(ing.metadata).toEqual({ name: 'hijack', namespace: 'other', resourceVersion: '7' });
    expect([...hostnamesOf('Ingress', ing)].sort()).toEqual(['tls.example.com', 'www.example.com']);
    slimForeignRoute('Ingress', ing);
    expect([...hostnamesOf('Ingress', ing)].sort()).toEqual(['tls.example.com', 'www.example.com']);
    const proxy = obj({ virtualhost: { fqdn: 'a.example.com', tls: {} }, routes: [] });
    slimForeignRoute('HTTPProxy', proxy);
    expect(proxy).toMatchObject({ spec: { virtualhost: { fqdn: 'a.example.com' } } });
    const route = obj({ hostnames: ['b.example.com'], rules: [] });
    slimForeignRoute('HTTPRoute', route);
    expect((route as { spec?: unknown }).spec).toEqual({ hostnames: ['b.example.com'] });
  });

  it('keeps the CustomDomain controller reference’s uid, idempotently, and nothing of other references', () => {
    const ing = obj({ rules: [{ host: 'www.example.com' }] });
    ing.metadata = {
      ...ing.metadata,
      labels: { 'app.kubernetes.io/managed-by': 'portico' },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'Deployment', name: 'd', uid: 'uid-d' },
        cdRef('uid-www'),
      ],
    };
    slimForeignRoute('Ingress', ing);
    expect(controllerOwnerUid(ing)).toBe('uid-www');
    expect(ing.metadata.ownerReferences).toHaveLength(1);
    expect(ing.metadata.labels).toBeUndefined();
    slimForeignRoute('Ingress', ing);
    expect(controllerOwnerUid(ing)).toBe('uid-www');
    const plain = obj({ rules: [{ host: 'www.example.com' }] });
    slimForeignRoute('Ingress', plain);
    expect(plain.metadata?.ownerReferences).toBeUndefined();
  });
});

describe('routeClassOf and servedWithPortico (the class a controller reads, as Contour v1.33.8)', () => {
  const withClass = (spec: unknown, annotations?: Record<string, string>): KubernetesObject => ({
    ...obj(spec),
    metadata: { name: 'x', namespace: 'y', ...(annotations ? { annotations } : {}) },
  });

  it("reads projectcontour.io/ingress.class, then kubernetes.io/ingress.class, then spec.ingressClassName; '' for none and for an HTTPRoute", () => {
    const both = { 'projectcontour.io/ingress.class': 'a', 'kubernetes.io/ingress.class': 'b' };
    expect(routeClassOf('HTTPProxy', withClass({ ingressClassName: 'c' }, both))).toBe('a');
    expect(
      routeClassOf('Ingress', withClass({ ingressClassName: 'c' }, { 'kubernetes.io/ingress.class': 'b' })),
    ).toBe('b');
    expect(
      routeClassOf('Ingress', withClass({ ingressClassName: 'c' }, { 'kubernetes.io/ingress.class': '' })),
    ).toBe('c');
    expect(routeClassOf('Ingress', withClass({}))).toBe('');
    expect(routeClassOf('HTTPRoute', withClass({ ingressClassName: 'c' }))).toBe('');
  });

  it.each([
    ['no class of Portico: every object counts', undefined, 'other', true],
    ['the same class counts', 'portico-edge', 'portico-edge', true],
    ['another class does not', 'portico-edge', 'contour', false],
    ['no class does not, for a class other than contour', 'portico-edge', '', false],
    ['no class counts with class contour (Contour without --ingress-class-name)', 'contour', '', true],
  ])('%s', (_name, portico, theirs, served) => {
    const spec = theirs === '' ? { virtualhost: { fqdn: 'a.example.com' } } : { ingressClassName: theirs };
    expect(servedWithPortico('HTTPProxy', withClass(spec), portico)).toBe(served);
    expect(servedWithPortico('Ingress', withClass(spec), portico)).toBe(served);
  });

  it('counts an HTTPRoute whatever the class', () => {
    expect(servedWithPortico('HTTPRoute', obj({ hostnames: ['a.example.com'] }), 'portico-edge')).toBe(true);
  });

  it('trims a route of another class to no hostname, and keeps the class so that trimming again changes nothing', () => {
    const theirs = withClass({
      ingressClassName: 'contour',
      virtualhost: { fqdn: 'a.example.com' },
    });
    slimForeignRoute('HTTPProxy', theirs, 'portico-edge');
    expect(hostnamesOf('HTTPProxy', theirs).size).toBe(0);
    const ours = withClass(
      { rules: [{ host: 'b.example.com' }] },
      {
        'projectcontour.io/ingress.class': 'portico-edge',
      },
    );
    slimForeignRoute('Ingress', ours, 'portico-edge');
    slimForeignRoute('Ingress', ours, 'portico-edge');
    expect([...hostnamesOf('Ingress', ours)]).toEqual(['b.example.com']);
    expect(routeClassOf('Ingress', ours)).toBe('portico-edge');
  });
});

describe('the routes of the apps domain (auto-generated subdomains)', () => {
  const sub = 'blog.apps.example';
  const blog = ownerKey('blog', 'uid-project');

  it("counts a Project's controller reference as its owner, as a CustomDomain's is", () => {
    const ref = {
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'Project',
      name: 'site',
      uid: 'uid-project',
      controller: true,
    };
    expect(controllerOwnerUid({ metadata: { ownerReferences: [ref] } })).toBe('uid-project');
    expect(
      controllerOwnerUid({ metadata: { ownerReferences: [{ ...ref, apiVersion: 'evil.dev/v1' }] } }),
    ).toBeUndefined();
  });

  it('lists every name under the apps domain with the routes its owners do not hold, the domain itself left out', () => {
    const index = new ForeignRouteIndex();
    index.set('Ingress blog/portico-subdomain-site', new Set([sub]), blog);
    index.set('HTTPProxy shop/grab', new Set([sub, 'nobody.apps.example']));
    index.set('Ingress shop/apex', new Set(['apps.example']));
    index.set('Ingress shop/elsewhere', new Set(['www.shop.example']));
    expect(index.routesUnder('Apps.Example.', new Set([blog]))).toEqual(
      [
        { hostname: sub, routes: ['HTTPProxy shop/grab'] },
        { hostname: 'nobody.apps.example', routes: ['HTTPProxy shop/grab'] },
      ].sort((a, b) => (a.hostname < b.hostname ? -1 : 1)),
    );
    index.delete('HTTPProxy shop/grab');
    expect(index.routesUnder('apps.example', new Set([blog]))).toEqual([]);
  });

  it('reads the namespace of a route id', () => {
    expect(routeNamespace(routeId('HTTPRoute', obj({}, 'r', 'team-a')))).toBe('team-a');
  });
});
