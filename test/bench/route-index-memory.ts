/**
 * Benchmark: what the route watches' cache costs per route now that every Ingress is watched
 * (docs/routing.md, "Foreign routes"): N Ingresses shaped as Portico writes them are trimmed by
 * `slimForeignRoute`, held in a Map as the informer holds them, and indexed by `ForeignRouteIndex`
 * with their owner; the JS heap is measured before and after, each after a full collection. Prints
 * MiB in total and bytes per route, for the copies alone and with the index.
 *
 *   node --expose-gc --import tsx test/bench/route-index-memory.ts            # 10,000 routes
 *   node --expose-gc --import tsx test/bench/route-index-memory.ts --routes 20000
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  controllerOwnerUid,
  ForeignRouteIndex,
  hostnamesOf,
  ownerKey,
  routeId,
  slimForeignRoute,
} from '../../src/routing/foreign-routes.js';

const { values } = parseArgs({ options: { routes: { type: 'string', default: '10000' } } });
const routes = Number(values.routes);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

/** An Ingress as Portico writes it for domain `i` (routing/ingress.ts). */
function ingress(i: number): KubernetesObject {
  const host = `www${String(i)}.example.com`;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name: `portico-d${String(i)}`,
      namespace: `tenant-${String(i % 500)}`,
      resourceVersion: String(100_000 + i),
      labels: { 'app.kubernetes.io/managed-by': 'portico', 'portico.dev/customdomain': `d${String(i)}` },
      ownerReferences: [
        {
          apiVersion: 'portico.dev/v1alpha1',
          kind: 'CustomDomain',
          name: `d${String(i)}`,
          uid: randomUUID(),
          controller: true,
        },
      ],
    },
    spec: {
      rules: [
        {
          host,
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { number: 80 } } } },
            ],
          },
        },
      ],
      tls: [{ hosts: [host], secretName: `d${String(i)}-tls` }],
    },
  } as KubernetesObject;
}

function heapAfterGc(): number {
  gc?.();
  return process.memoryUsage().heapUsed;
}

function run(withIndex: boolean): number {
  const before = heapAfterGc();
  const cache = new Map<string, KubernetesObject>();
  const index = new ForeignRouteIndex();
  for (let i = 0; i < routes; i++) {
    const obj = ingress(i);
    slimForeignRoute('Ingress', obj);
    cache.set(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`, obj);
    if (!withIndex) continue;
    const uid = controllerOwnerUid(obj);
    const owner = uid === undefined ? undefined : ownerKey(obj.metadata?.namespace ?? '', uid);
    index.set(routeId('Ingress', obj), hostnamesOf('Ingress', obj), owner);
  }
  const used = heapAfterGc() - before;
  if (cache.size !== routes || (withIndex && index.size !== routes)) throw new Error('not all routes held');
  return used;
}

const MiB = 1024 * 1024;
for (const [label, withIndex] of [
  ['trimmed copies', false],
  ['trimmed copies and the index', true],
] as const) {
  const used = run(withIndex);
  console.log(
    `${String(routes)} routes, ${label}: ${(used / MiB).toFixed(1)} MiB, ${(used / routes).toFixed(0)} B per route`,
  );
}
