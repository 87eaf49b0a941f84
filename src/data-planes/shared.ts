/**
 * Sentences and route kinds shared by several data planes (the Ingress and Gateway API kinds are
 * every data plane's, not one's). Pure.
 */
import {
  httpRouteAcknowledgement,
  ingressAcknowledgement,
  listenerSetAcknowledgement,
} from '../routing/acknowledgement.js';
import { GATEWAY_API_VERSION, HTTPROUTE_KIND, LISTENERSET_KIND, type HTTPRoute } from '../routing/gateway.js';
import type { RouteKind } from './types.js';

export const NO_LISTENERSET =
  "Portico attaches each domain's certificate to the Gateway with a ListenerSet, which it does not implement, so HTTPS would never serve the certificate";

export const IGNORES_TRAEFIK_MIDDLEWARE =
  "it serves the Ingress but ignores Traefik's router.middlewares annotation and Middleware, so the hostname would be proxied to the Ingress's backend instead of redirected";

export const READS_NO_HTTPPROXY = 'it reads no HTTPProxy';

/** A list of the strings in `value` (an array of anything; anything else: none). */
export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** `value` as an object (anything else: an empty one). */
export function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** Who reports on a Gateway API object: the data plane's name, else "the gateway". */
const gatewayReporter = (dataPlaneName: string | undefined): string => dataPlaneName ?? 'the gateway';

/** networking.k8s.io/v1 Ingress: acknowledged by its published address; a foreign route by its hosts. */
export const INGRESS_ROUTE_KIND: RouteKind = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'Ingress',
  plural: 'ingresses',
  crd: false,
  acknowledge: (c) => ingressAcknowledgement(c.cached, c.name, c.ingressClassName, c.dataPlaneName),
  foreignRoute: {
    hostnames: (spec) => [
      ...(Array.isArray(spec.rules) ? spec.rules : []).flatMap((r) => strings([record(r).host])),
      ...(Array.isArray(spec.tls) ? spec.tls : []).flatMap((t) => strings(record(t).hosts)),
    ],
    slimSpec: (hosts, classField) => ({ ...classField, rules: hosts.map((host) => ({ host })) }),
    classed: true,
  },
};

/** Gateway API HTTPRoute: acknowledged per parentRef; a foreign route by `spec.hostnames`. */
export const HTTPROUTE_ROUTE_KIND: RouteKind = {
  apiVersion: GATEWAY_API_VERSION,
  kind: HTTPROUTE_KIND,
  plural: 'httproutes',
  crd: true,
  acknowledge: (c) =>
    httpRouteAcknowledgement(
      c.cached,
      c.name,
      c.namespace,
      (c.applied as HTTPRoute).spec.parentRefs,
      c.dataPlaneName,
    ),
  reporter: gatewayReporter,
  foreignRoute: {
    hostnames: (spec) => strings(spec.hostnames),
    slimSpec: (hosts) => ({ hostnames: hosts }),
    classed: false,
  },
};

/** Gateway API ListenerSet: the domain's HTTPS listener, acknowledged by `Accepted` and `Programmed`. */
export const LISTENERSET_ROUTE_KIND: RouteKind = {
  apiVersion: GATEWAY_API_VERSION,
  kind: LISTENERSET_KIND,
  plural: 'listenersets',
  crd: true,
  acknowledge: (c) => listenerSetAcknowledgement(c.cached, c.name, c.dataPlaneName),
  reporter: gatewayReporter,
};
