/**
 * The Ingress of a Project's auto-generated subdomain, shared by the Ingress-based flavors' subdomain
 * writers (data-planes/traefik/subdomain-route.ts, data-planes/ingress-nginx/subdomain-route.ts).
 * Pure.
 *
 * An Ingress names a TLS Secret of its own namespace only (networking.k8s.io/v1 `IngressTLS`), and
 * the wildcard certificate stays in the operator's namespace (its key serves every project's
 * subdomain, so no tenant namespace gets a copy). So the Ingress lists the subdomain in `spec.tls`
 * without a `secretName`: TLS for the host, its certificate from the data plane's own store
 * (ingress-nginx: `--default-ssl-certificate`; Traefik: the certificates of its TLSStore `default`,
 * matched by SNI).
 */
import type { V1HTTPIngressPath, V1Ingress } from '@kubernetes/client-node';
import type { SubdomainRouteInput } from '../data-planes/types.js';

/**
 * The subdomain's Ingress, `metadata.name`: one path `/` to the project's Service (also for a
 * redirect: Traefik builds no router for a path whose Service does not exist), TLS for the host
 * without a Secret, `annotations` (the flavor's redirect) when given.
 */
export function subdomainIngress(
  input: SubdomainRouteInput,
  annotations?: Record<string, string>,
): V1Ingress {
  const backend = input.service;
  const paths: V1HTTPIngressPath[] = [
    {
      path: '/',
      pathType: 'Prefix',
      backend: { service: { name: backend.name, port: { number: backend.port } } },
    },
  ];
  const { ingressClassName } = input.options;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { ...input.metadata, ...(annotations ? { annotations } : {}) },
    spec: {
      ...(ingressClassName ? { ingressClassName } : {}),
      tls: [{ hosts: [input.hostname] }],
      rules: [{ host: input.hostname, http: { paths } }],
    },
  };
}
