/**
 * The data planes the operator can be told it runs with (`--data-plane`), one module each
 * (docs/architecture.md, "A data plane is one folder"), and what is derived from them: the route
 * kinds the CustomDomain controller watches and acknowledges, the ingress-class rules of foreign
 * routes. A new data plane is a folder `src/data-planes/<name>/` and one line in `DATA_PLANE_MODULES`.
 * Pure.
 */
import { contour } from './contour/index.js';
import { envoyGateway } from './envoy-gateway/index.js';
import { ingressNginx } from './ingress-nginx/index.js';
import { HTTPROUTE_ROUTE_KIND, INGRESS_ROUTE_KIND, LISTENERSET_ROUTE_KIND } from './shared.js';
import { traefik } from './traefik/index.js';
import type { DataPlaneModule, FlavorWriter, IngressFlavor, RouteKind } from './types.js';

/** Every data plane, in the order flags and tables list them. */
export const DATA_PLANE_MODULES = [contour, envoyGateway, traefik, ingressNginx] as const;

/** A data plane the operator can be told it runs with (`--data-plane`). */
export type DataPlane = (typeof DATA_PLANE_MODULES)[number]['name'];

export const DATA_PLANES: readonly DataPlane[] = DATA_PLANE_MODULES.map((m) => m.name);

/** The module of `name`. */
export function dataPlaneModule(name: DataPlane): DataPlaneModule<DataPlane> {
  const found = DATA_PLANE_MODULES.find((m) => m.name === name);
  if (found === undefined) throw new Error(`no data plane module "${name}"`);
  return found;
}

/**
 * Every kind of routing object, shared (Ingress, HTTPRoute, ListenerSet) and each data plane's own,
 * by `kind`.
 */
export const ROUTE_KINDS: ReadonlyMap<string, RouteKind> = new Map(
  [
    INGRESS_ROUTE_KIND,
    HTTPROUTE_ROUTE_KIND,
    LISTENERSET_ROUTE_KIND,
    ...DATA_PLANE_MODULES.flatMap((m) => m.routeKinds),
  ].map((k) => [k.kind, k]),
);

/** The route kinds whose foreign objects can take a claimed hostname's traffic. */
export const FOREIGN_ROUTE_KINDS: readonly string[] = [...ROUTE_KINDS.values()]
  .filter((k) => k.foreignRoute !== undefined)
  .map((k) => k.kind);

/** The annotations that name an object's ingress class before `kubernetes.io/ingress.class`. */
export const INGRESS_CLASS_ANNOTATIONS: readonly string[] = [
  ...DATA_PLANE_MODULES.flatMap((m) =>
    m.ingressClass?.annotation === undefined ? [] : [m.ingressClass.annotation],
  ),
  'kubernetes.io/ingress.class',
];

/** The classes whose controller, run without a class flag, also serves objects that name none. */
export const CLASSES_SERVING_CLASSLESS: ReadonlySet<string> = new Set(
  DATA_PLANE_MODULES.flatMap((m) =>
    m.ingressClass?.defaultClassServesClassless === undefined
      ? []
      : [m.ingressClass.defaultClassServesClassless],
  ),
);

/** The ingress flavors' writers, each brought by one data plane module (`flavorWriter`). */
export const FLAVOR_WRITERS: readonly FlavorWriter[] = DATA_PLANE_MODULES.flatMap((m: DataPlaneModule) =>
  m.flavorWriter === undefined ? [] : [m.flavorWriter],
);

/** The writer of ingress flavor `flavor`. Throws when no module brings it (a registry defect). */
export function flavorWriter(flavor: IngressFlavor): FlavorWriter {
  const found = FLAVOR_WRITERS.find((w) => w.flavor === flavor);
  if (found === undefined) throw new Error(`no data plane module writes the ingress flavor "${flavor}"`);
  return found;
}
