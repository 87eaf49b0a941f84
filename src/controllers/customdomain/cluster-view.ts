/**
 * What the CustomDomain reconcile reads of the rest of the cluster, served from informer caches so a
 * reconcile costs no extra API calls: namespace labels (the plan), ready endpoints of a Service (the
 * deploy gate). Hostname claims are read from the API server itself (hostname-claims.ts).
 */

export interface ClusterView {
  /** The labels of namespace `name`, or undefined when it is not (yet) cached. */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined;
  /** Ready endpoints across the EndpointSlices of Service `service` in `namespace`. */
  readyEndpoints(namespace: string, service: string): number;
}
