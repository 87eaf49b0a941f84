/**
 * What the CustomDomain reconcile reads of the cluster, served from informer caches so a reconcile
 * that changes nothing costs no API request (cert-manager's listers): the CustomDomain itself,
 * namespace labels (the plan), ready endpoints of a Service (the deploy gate), the objects Portico
 * owns, and the HostnameClaims. A live read is the exception, made where a decision needs a value
 * fresher than a cache (each one says why where it is made).
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { CustomDomain } from '../../api/customdomain.js';
import type { HostnameClaim } from '../../api/hostnameclaim.js';
import type { ObjectHeader, ServicePortEntry } from '../../routing/plan.js';

/**
 * An owned object as the caches know it. `cached: true`: the cache of that kind has listed, and
 * `object` is its copy (undefined: the object does not exist, or its kind is not served at all).
 * `cached: false`: no cache answers for that kind yet; ask the API server.
 */
export type OwnedLookup = { cached: true; object: KubernetesObject | undefined } | { cached: false };

export interface ClusterView {
  /** The labels of namespace `name`, or undefined when it is not (yet) cached. */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined;
  /** The metadata.uid of namespace `name`, or undefined when it is not (yet) cached. */
  namespaceUid(name: string): string | undefined;
  /** Ready endpoints across the EndpointSlices of Service `service` in `namespace`. */
  readyEndpoints(namespace: string, service: string): number;
  /**
   * The ports of Service `name` in `namespace` (`spec.ports[].name` and `.port`), or undefined when
   * no such Service is cached.
   */
  servicePorts(namespace: string, name: string): readonly ServicePortEntry[] | undefined;
  /** The cached CustomDomain, or undefined when the cache does not hold it. */
  customDomain(namespace: string, name: string): CustomDomain | undefined;
  /** The cached CustomDomains of `namespace` (a redirect's target is one of them, routing/redirect.ts). */
  customDomainsInNamespace(namespace: string): CustomDomain[];
  /** The cached HostnameClaim of `hostname` (normalized), or undefined. */
  hostnameClaim(hostname: string): HostnameClaim | undefined;
  /**
   * An object Portico owns (Ingress, Secret, Service, Middleware, HTTPRoute, ListenerSet, HTTPProxy), from its
   * cache, status included (the data plane's acknowledgement is read from it).
   */
  owned(header: ObjectHeader): OwnedLookup;
  /**
   * False when the API server is known not to serve `apiVersion` `kind` (an optional kind whose CRD
   * is not installed, found at start); true otherwise.
   */
  serves(apiVersion: string, kind: string): boolean;
  /**
   * The routes (Ingress; HTTPProxy and HTTPRoute where served) that name `hostname` exactly, but
   * those whose CustomDomain controller owner is in `owners` (routing/foreign-routes.ts `ownerKey`),
   * each `Kind namespace/name`, sorted (routing/foreign-routes.ts).
   */
  foreignRoutes(hostname: string, owners: ReadonlySet<string>): string[];
  /**
   * Every hostname under `domain` that routes name, with those routes but the ones whose owner is in
   * `owners` (routing/foreign-routes.ts `ForeignRouteIndex.routesUnder`); for the apps domain.
   */
  foreignRoutesUnder(domain: string, owners: ReadonlySet<string>): { hostname: string; routes: string[] }[];
}
