/**
 * How the `traefik` flavor writes a Project's auto-generated subdomain (docs/customdomains.md, "The
 * auto-generated subdomain"): one Ingress `portico-subdomain-<project>` (routing/subdomain-ingress.ts)
 * to the project's Service; in Replace mode the same Ingress with a redirect Middleware
 * `portico-subdomain-<project>-redirect` (middleware.ts: 301 to GET, 308 to other methods, path and
 * query kept). Pure.
 *
 * The certificate: an Ingress names only a Secret of its own namespace, and a copy of the wildcard
 * Secret in each project's namespace would give every tenant that reads its own Secrets the key of
 * every other project's subdomain. Traefik has a store of its own instead: the TLSStore `default`
 * (traefik.io/v1alpha1; Traefik v3.6 docs reference/routing-configuration/kubernetes/crd/tls/tlsstore.md:
 * "Traefik currently only uses the TLS Store named default", one per cluster) whose `certificates`
 * are Secrets of the TLSStore's namespace added to the store that every router's TLS uses, chosen by
 * SNI. `certificateAccess` is that TLSStore in the operator's namespace, naming the wildcard Secret
 * there; the Ingress lists the subdomain in `spec.tls` without a `secretName` (Traefik's ingress
 * provider skips such an entry, pkg/provider/kubernetes/ingress/kubernetes.go `getCertificates`).
 * A platform that keeps a TLSStore `default` of its own elsewhere adds the Secret to it instead
 * (two in different namespaces are both ignored by Traefik).
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { subdomainIngress } from '../../routing/subdomain-ingress.js';
import type { SubdomainRouteWriter } from '../types.js';
import {
  TRAEFIK_API_VERSION,
  TRAEFIK_MIDDLEWARE_KIND,
  TRAEFIK_ROUTER_MIDDLEWARES,
  traefikMiddlewareReference,
  traefikRedirectMiddleware,
} from './middleware.js';

export const TRAEFIK_TLSSTORE_KIND = 'TLSStore';
/** The one TLSStore Traefik uses (its default store). */
export const TRAEFIK_DEFAULT_TLSSTORE = 'default';

function middlewareName(name: string): string {
  return `${name}-redirect`;
}

export const traefikSubdomainRoute: SubdomainRouteWriter = {
  flavor: 'traefik',
  plan: (input) => {
    const { metadata, redirect } = input;
    if (!redirect) return { apply: [subdomainIngress(input)], what: `Ingress ${metadata.name} (Traefik)` };
    const middleware = traefikRedirectMiddleware(redirect, {
      ...metadata,
      name: middlewareName(metadata.name),
    });
    const reference = traefikMiddlewareReference(
      metadata.namespace,
      middlewareName(metadata.name),
      input.options.traefikSafeNaming ?? false,
    );
    return {
      apply: [middleware, subdomainIngress(input, { [TRAEFIK_ROUTER_MIDDLEWARES]: reference })],
      what: `Ingress ${metadata.name} with Traefik Middleware ${middlewareName(metadata.name)}`,
    };
  },
  owned: (metadata) => [
    { apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', metadata },
    {
      apiVersion: TRAEFIK_API_VERSION,
      kind: TRAEFIK_MIDDLEWARE_KIND,
      metadata: { ...metadata, name: middlewareName(metadata.name) },
    },
  ],
  certificateSource: `the Ingress lists the subdomain in spec.tls without a Secret; Traefik takes the wildcard from the certificates of its TLSStore ${TRAEFIK_DEFAULT_TLSSTORE}, which the operator keeps in its own namespace naming the wildcard Secret`,
  certificateAccess: (secret): KubernetesObject =>
    ({
      apiVersion: TRAEFIK_API_VERSION,
      kind: TRAEFIK_TLSSTORE_KIND,
      metadata: { name: TRAEFIK_DEFAULT_TLSSTORE, namespace: secret.namespace },
      spec: { certificates: [{ secretName: secret.name }] },
    }) as KubernetesObject,
};
