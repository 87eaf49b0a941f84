/**
 * The routing a CustomDomain wants, as Kubernetes objects (DESIGN.md "Routed"). Pure: computes the
 * desired objects; the controller applies them with server-side apply.
 */
import type { V1Ingress, V1IngressBackend, V1HTTPIngressPath, V1Service } from '@kubernetes/client-node';
import {
  API_VERSION,
  CUSTOM_DOMAIN_KIND,
  CUSTOM_DOMAIN_LABEL,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ownedNames,
  type CustomDomain,
} from '../api/customdomain.js';

/** The path prefix of ACME HTTP-01 challenges (RFC 8555 §8.3). */
export const HTTP01_PATH_PREFIX = '/.well-known/acme-challenge/';
/** The per-namespace Service that forwards HTTP-01 challenge requests to the operator. */
export const HTTP01_SERVICE_NAME = 'portico-acme-http01';

export interface RoutingOptions {
  /** `spec.ingressClassName` of every Ingress; undefined leaves the cluster default. */
  ingressClassName?: string;
  /**
   * Where the operator's challenge server is reachable in the cluster, e.g.
   * `portico-controller.portico-system.svc.cluster.local` port 8089. When set, each Ingress routes
   * `/.well-known/acme-challenge/` there through an ExternalName Service in the domain's namespace
   * (an Ingress backend must be a Service of its own namespace).
   */
  http01Service?: { fqdn: string; port: number };
}

/** The labels and owner reference every owned object carries. */
export function ownedMetadata(domain: CustomDomain, name: string): V1Ingress['metadata'] & object {
  return {
    name,
    namespace: domain.metadata.namespace,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [CUSTOM_DOMAIN_LABEL]: domain.metadata.name },
    ownerReferences: [
      {
        apiVersion: API_VERSION,
        kind: CUSTOM_DOMAIN_KIND,
        name: domain.metadata.name,
        uid: domain.metadata.uid ?? '',
        controller: true,
      },
    ],
  };
}

function serviceBackend(name: string, port: number | string): V1IngressBackend {
  return { service: { name, port: typeof port === 'number' ? { number: port } : { name: port } } };
}

/**
 * The Ingress that serves `spec.hostname` from `spec.service` over TLS from the domain's Secret.
 * Returns undefined when the domain has no service to route to.
 */
export function desiredIngress(domain: CustomDomain, options: RoutingOptions): V1Ingress | undefined {
  const service = domain.spec.service;
  if (!service) return undefined;
  const names = ownedNames(domain);
  const paths: V1HTTPIngressPath[] = [];
  if (options.http01Service) {
    paths.push({
      path: HTTP01_PATH_PREFIX,
      pathType: 'Prefix',
      backend: serviceBackend(HTTP01_SERVICE_NAME, options.http01Service.port),
    });
  }
  paths.push({ path: '/', pathType: 'Prefix', backend: serviceBackend(service.name, service.port ?? 80) });
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: ownedMetadata(domain, names.ingress),
    spec: {
      ...(options.ingressClassName ? { ingressClassName: options.ingressClassName } : {}),
      tls: [{ hosts: [domain.spec.hostname], secretName: names.secret }],
      rules: [{ host: domain.spec.hostname, http: { paths } }],
    },
  };
}

/** The ExternalName Service that forwards challenge requests to the operator, or undefined. */
export function desiredHttp01Service(domain: CustomDomain, options: RoutingOptions): V1Service | undefined {
  if (!options.http01Service) return undefined;
  const metadata = ownedMetadata(domain, HTTP01_SERVICE_NAME);
  // Shared by every domain of the namespace: no single owner, so no owner reference.
  delete metadata.ownerReferences;
  delete metadata.labels?.[CUSTOM_DOMAIN_LABEL];
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata,
    spec: {
      type: 'ExternalName',
      externalName: options.http01Service.fqdn,
      ports: [{ name: 'http', port: options.http01Service.port, targetPort: options.http01Service.port }],
    },
  };
}
