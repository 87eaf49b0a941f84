import type {
  KubernetesObject,
  V1ManagedFieldsEntry,
  V1ObjectMeta,
  V1OwnerReference,
  V1Service,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';

import { APPLIED_DIGEST_ANNOTATION, contains, isUpToDate, withAppliedDigest } from './applied-state.js';

interface Path {
  path: string;
  pathType?: string;
  backend: { service: { name: string; port: { number: number } | { name: string } } };
}

/** An Ingress typed with the fields the tests edit, so edits need no non-null assertions. */
interface Ingress extends KubernetesObject {
  metadata: V1ObjectMeta & {
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: [V1OwnerReference];
    managedFields?: V1ManagedFieldsEntry[];
  };
  spec: {
    ingressClassName?: string;
    tls?: [{ hosts: string[]; secretName: string }];
    rules: [{ host: string; http: { paths: [Path, Path] } }];
  };
  status?: { loadBalancer: { ingress: { ip: string }[] } };
}

/** An Ingress as Portico builds one: labels, owner reference, TLS and one rule with two paths. */
function ingress(): Ingress {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name: 'portico-www',
      namespace: 'shop',
      labels: { 'app.kubernetes.io/managed-by': 'portico', 'portico.dev/customdomain': 'www' },
      annotations: { 'nginx.ingress.kubernetes.io/ssl-redirect': 'true' },
      ownerReferences: [
        {
          apiVersion: 'portico.dev/v1alpha1',
          kind: 'CustomDomain',
          name: 'www',
          uid: 'u-1',
          controller: true,
        },
      ],
    },
    spec: {
      ingressClassName: 'nginx',
      tls: [{ hosts: ['www.example.com'], secretName: 'www-tls' }],
      rules: [
        {
          host: 'www.example.com',
          http: {
            paths: [
              {
                path: '/.well-known/acme-challenge/',
                pathType: 'Prefix',
                backend: { service: { name: 'portico-acme-http01', port: { number: 8089 } } },
              },
              { path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { number: 80 } } } },
            ],
          },
        },
      ],
    },
  };
}

function tlsOf(obj: Ingress): { hosts: string[]; secretName: string } {
  if (!obj.spec.tls) throw new Error('the Ingress has no TLS');
  return obj.spec.tls[0];
}

/** `record` without `key`. */
function without(record: Record<string, string>, key: string): Record<string, string> {
  return Object.fromEntries(Object.entries(record).filter(([k]) => k !== key));
}

function digestOf(obj: KubernetesObject): string | undefined {
  return obj.metadata?.annotations?.[APPLIED_DIGEST_ANNOTATION];
}

/**
 * What an informer holds after `desired` was applied: a list item (no apiVersion, kind) with the
 * fields the API server and other controllers add.
 */
function asCached(desired: Ingress): Ingress {
  const cached = structuredClone(desired);
  delete cached.apiVersion;
  delete cached.kind;
  cached.metadata = {
    ...cached.metadata,
    uid: '7f1c3e1a-0000-4000-8000-000000000001',
    resourceVersion: '4711',
    generation: 3,
    creationTimestamp: new Date('2026-01-01T00:00:00Z'),
    labels: { ...cached.metadata.labels, 'team.example.com/owner': 'shop' },
    annotations: { ...cached.metadata.annotations, 'other-controller/seen': 'yes' },
    managedFields: [
      {
        manager: 'portico-controller',
        operation: 'Apply',
        apiVersion: 'networking.k8s.io/v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:spec': {} },
      },
    ],
  };
  cached.status = { loadBalancer: { ingress: [{ ip: '203.0.113.10' }] } };
  return cached;
}

describe('withAppliedDigest', () => {
  it('adds a 22-character base64url digest and keeps every other field', () => {
    const desired = withAppliedDigest(ingress());
    const digest = digestOf(desired);

    expect(digest).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const annotations = without(desired.metadata.annotations, APPLIED_DIGEST_ANNOTATION);
    expect({ ...desired, metadata: { ...desired.metadata, annotations } }).toEqual(ingress());
  });

  it('gives equal objects the same digest', () => {
    expect(digestOf(withAppliedDigest(ingress()))).toBe(digestOf(withAppliedDigest(ingress())));
    const bare: KubernetesObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } };
    expect(digestOf(withAppliedDigest(bare))).toBe(digestOf(withAppliedDigest(structuredClone(bare))));
  });

  it('gives a different digest for any change, removals included', () => {
    const changes: Record<string, (obj: Ingress) => void> = {
      'rule host': (o) => {
        o.spec.rules[0].host = 'shop.example.com';
      },
      'backend port': (o) => {
        o.spec.rules[0].http.paths[1].backend.service.port = { number: 8080 };
      },
      'removed path': (o) => {
        o.spec.rules[0].http.paths.shift();
      },
      'removed TLS': (o) => {
        delete o.spec.tls;
      },
      'removed ingress class': (o) => {
        delete o.spec.ingressClassName;
      },
      'removed annotation': (o) => {
        o.metadata.annotations = {};
      },
      'changed annotation': (o) => {
        o.metadata.annotations['nginx.ingress.kubernetes.io/ssl-redirect'] = 'false';
      },
      'added annotation': (o) => {
        o.metadata.annotations['example.com/x'] = '1';
      },
      'removed label': (o) => {
        delete o.metadata.labels['portico.dev/customdomain'];
      },
      'changed label': (o) => {
        o.metadata.labels['portico.dev/customdomain'] = 'www2';
      },
      'removed owner reference': (o) => {
        (o.metadata as V1ObjectMeta).ownerReferences = [];
      },
      name: (o) => {
        o.metadata.name = 'portico-www2';
      },
    };
    const digests = new Map<string, string | undefined>([
      ['unchanged', digestOf(withAppliedDigest(ingress()))],
    ]);
    for (const [change, apply] of Object.entries(changes)) {
      const obj = ingress();
      apply(obj);
      digests.set(change, digestOf(withAppliedDigest(obj)));
    }
    expect(new Set(digests.values()).size).toBe(digests.size);
  });

  it('does not modify its input', () => {
    const input = ingress();
    const copy = structuredClone(input);
    withAppliedDigest(input);
    expect(input).toEqual(copy);
    expect(input.metadata?.annotations).not.toHaveProperty(APPLIED_DIGEST_ANNOTATION);

    const withoutMetadata: KubernetesObject = { apiVersion: 'v1', kind: 'Namespace' };
    expect(digestOf(withAppliedDigest(withoutMetadata))).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(withoutMetadata).toEqual({ apiVersion: 'v1', kind: 'Namespace' });
  });

  it('ignores a digest annotation already present', () => {
    const once = withAppliedDigest(ingress());
    expect(withAppliedDigest(once)).toEqual(once);

    const stale = ingress();
    stale.metadata.annotations[APPLIED_DIGEST_ANNOTATION] = 'not-the-digest';
    expect(withAppliedDigest(stale)).toEqual(once);
  });
});

describe('isUpToDate', () => {
  const desired = withAppliedDigest(ingress());

  it('is false without a cached object', () => {
    expect(isUpToDate(undefined, desired)).toBe(false);
  });

  it('is true for the applied object itself', () => {
    expect(isUpToDate(structuredClone(desired), desired)).toBe(true);
  });

  it('is true when the cached copy has server-set fields and lacks apiVersion and kind', () => {
    const cached = asCached(desired);
    expect(cached).not.toHaveProperty('apiVersion');
    expect(isUpToDate(cached, desired)).toBe(true);
  });

  it('is true with defaulted fields inside array elements', () => {
    const service = withAppliedDigest<V1Service>({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'portico-acme-http01', namespace: 'shop' },
      spec: {
        type: 'ExternalName',
        externalName: 'portico.portico-system.svc.cluster.local',
        ports: [{ name: 'http', port: 8089 }],
      },
    });
    const cached = structuredClone(service);
    cached.spec = {
      ...cached.spec,
      sessionAffinity: 'None',
      ports: [{ name: 'http', port: 8089, protocol: 'TCP', targetPort: 8089 }],
    };
    expect(isUpToDate(cached, service)).toBe(true);

    // An Ingress path whose pathType Portico leaves to the server.
    const plain = ingress();
    delete plain.spec.rules[0].http.paths[1].pathType;
    const wanted = withAppliedDigest(plain);
    const defaulted = asCached(wanted);
    defaulted.spec.rules[0].http.paths[1].pathType = 'ImplementationSpecific';
    expect(isUpToDate(defaulted, wanted)).toBe(true);
  });

  it('is false when the digest differs or is missing', () => {
    const cached = asCached(desired);
    cached.metadata.annotations[APPLIED_DIGEST_ANNOTATION] = 'AAAAAAAAAAAAAAAAAAAAAA';
    expect(isUpToDate(cached, desired)).toBe(false);

    cached.metadata.annotations = without(cached.metadata.annotations, APPLIED_DIGEST_ANNOTATION);
    expect(isUpToDate(cached, desired)).toBe(false);

    // A desired object that did not come from withAppliedDigest is never up to date.
    expect(isUpToDate(asCached(desired), ingress())).toBe(false);
  });

  it('is false after a removal Portico wants (a label, an annotation) though the cached copy holds more', () => {
    const removals: Record<string, (o: Ingress) => void> = {
      label: (o) => {
        delete o.metadata.labels['portico.dev/customdomain'];
      },
      annotation: (o) => {
        delete o.metadata.annotations['nginx.ingress.kubernetes.io/ssl-redirect'];
      },
    };
    for (const [removal, apply] of Object.entries(removals)) {
      const smaller = ingress();
      apply(smaller);
      // The cached copy still holds the removed field: every field of the smaller object is in it,
      // so a field check alone would accept it; the digest does not.
      const fields: Partial<Ingress> = { ...smaller };
      delete fields.apiVersion;
      delete fields.kind;
      expect(contains(asCached(desired), fields), removal).toBe(true);
      expect(isUpToDate(asCached(desired), withAppliedDigest(smaller)), removal).toBe(false);
    }
  });

  it('is false when a field Portico owns was changed by hand in the cached copy', () => {
    const edits: Record<string, (o: Ingress) => void> = {
      'rule host': (o) => {
        o.spec.rules[0].host = 'evil.example.com';
      },
      'backend port': (o) => {
        o.spec.rules[0].http.paths[1].backend.service.port = { number: 8080 };
      },
      'backend port by name': (o) => {
        o.spec.rules[0].http.paths[1].backend.service.port = { name: 'http' };
      },
      'backend service': (o) => {
        o.spec.rules[0].http.paths[1].backend.service.name = 'other';
      },
      'TLS secret': (o) => {
        tlsOf(o).secretName = 'other-tls';
      },
      'removed TLS': (o) => {
        delete o.spec.tls;
      },
      'ingress class': (o) => {
        o.spec.ingressClassName = 'traefik';
      },
      'annotation value': (o) => {
        o.metadata.annotations['nginx.ingress.kubernetes.io/ssl-redirect'] = 'false';
      },
      'removed label': (o) => {
        delete o.metadata.labels['portico.dev/customdomain'];
      },
      'owner reference': (o) => {
        o.metadata.ownerReferences[0].controller = false;
      },
      'rules replaced by an object': (o) => {
        (o.spec as Record<string, unknown>).rules = { 0: o.spec.rules[0] };
      },
    };
    for (const [edit, apply] of Object.entries(edits)) {
      const cached = asCached(desired);
      apply(cached);
      expect(isUpToDate(cached, desired), edit).toBe(false);
    }
  });

  it('is false when an array has another length, even if it starts with the desired elements', () => {
    const added = asCached(desired);
    added.spec.rules[0].http.paths.push({
      path: '/admin',
      pathType: 'Prefix',
      backend: { service: { name: 'admin', port: { number: 80 } } },
    });
    expect(isUpToDate(added, desired)).toBe(false);

    const removed = asCached(desired);
    removed.spec.rules[0].http.paths.pop();
    expect(isUpToDate(removed, desired)).toBe(false);

    const extraHost = asCached(desired);
    tlsOf(extraHost).hosts.push('www2.example.com');
    expect(isUpToDate(extraHost, desired)).toBe(false);
  });
});

describe('contains', () => {
  it('compares primitives strictly', () => {
    expect(contains(1, 1)).toBe(true);
    expect(contains('1', 1)).toBe(false);
    expect(contains(0, false)).toBe(false);
    expect(contains(undefined, null)).toBe(false);
    expect(contains(null, null)).toBe(true);
  });

  it('accepts extra fields in objects, at any depth, and skips undefined wanted fields', () => {
    expect(contains({ a: 1, b: { c: 2, d: 3 }, e: 4 }, { a: 1, b: { c: 2 } })).toBe(true);
    expect(contains({ a: 1 }, { a: 1, b: undefined })).toBe(true);
    expect(contains({ a: 1 }, {})).toBe(true);
    expect(contains({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(contains({ b: { c: 3 } }, { b: { c: 2 } })).toBe(false);
  });

  it('compares arrays element by element, with the same length', () => {
    expect(contains([{ a: 1, x: 0 }, { b: 2 }], [{ a: 1 }, { b: 2 }])).toBe(true);
    expect(contains([{ b: 2 }, { a: 1 }], [{ a: 1 }, { b: 2 }])).toBe(false);
    expect(contains([1, 2, 3], [1, 2])).toBe(false);
    expect(contains([1], [1, 2])).toBe(false);
    expect(contains([], [])).toBe(true);
  });

  it('does not take an array for an object, nor an object for an array', () => {
    expect(contains([1, 2], { 0: 1, 1: 2 })).toBe(false);
    expect(contains({ 0: 1, 1: 2, length: 2 }, [1, 2])).toBe(false);
    expect(contains(null, {})).toBe(false);
    expect(contains('x', {})).toBe(false);
    expect(contains(undefined, [])).toBe(false);
  });
});
