/**
 * How the `contour` flavor writes a Project's auto-generated subdomain (docs/customdomains.md, "The
 * auto-generated subdomain"): one HTTPProxy `portico-subdomain-<project>` in the project's namespace
 * (httpproxy.ts) that serves the Service or answers the redirect, its TLS Secret the wildcard in the
 * operator's namespace as `namespace/name`, written only once that Secret holds a certificate (an
 * HTTPProxy naming a Secret it cannot use is invalid as a whole, httpproxy.ts). Pure.
 *
 * Contour reads a Secret of another namespace only through a TLSCertificateDelegation in the
 * Secret's namespace that lists the HTTPProxy's namespace (Contour v1.33.8,
 * apis/projectcontour/v1/tlscertificatedelegation.go; internal/dag/cache.go `delegationPermitted`):
 * `certificateAccess` is that object, `portico-apps-domain`, listing the namespaces that hold a
 * subdomain. The key never leaves the operator's namespace.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { SubdomainRouteWriter } from '../types.js';
import { CONTOUR_API_VERSION, HTTPPROXY_KIND, httpProxy, redirectRoute, serviceRoute } from './httpproxy.js';

/** The TLSCertificateDelegation that lets the projects' HTTPProxies use the wildcard Secret. */
export const SUBDOMAIN_DELEGATION_NAME = 'portico-apps-domain';
export const TLS_CERTIFICATE_DELEGATION_KIND = 'TLSCertificateDelegation';

export const contourSubdomainRoute: SubdomainRouteWriter = {
  flavor: 'contour',
  plan: (input) => {
    const route = input.redirect ? redirectRoute(input.redirect) : serviceRoute('/', input.service);
    const { certificate, options } = input;
    const proxy = httpProxy(input.metadata, input.hostname, [route], {
      ...(certificate ? { tlsSecretName: `${certificate.namespace}/${certificate.name}` } : {}),
      ...(options.ingressClassName ? { ingressClassName: options.ingressClassName } : {}),
    });
    return { apply: [proxy], what: `HTTPProxy ${input.metadata.name} (Contour)` };
  },
  owned: (metadata) => [{ apiVersion: CONTOUR_API_VERSION, kind: HTTPPROXY_KIND, metadata }],
  certificateSource: `the HTTPProxy names the Secret as <namespace>/<name>, which Contour reads through the TLSCertificateDelegation ${SUBDOMAIN_DELEGATION_NAME} of the Secret's namespace`,
  certificateAccess: (secret, namespaces): KubernetesObject =>
    ({
      apiVersion: CONTOUR_API_VERSION,
      kind: TLS_CERTIFICATE_DELEGATION_KIND,
      metadata: { name: SUBDOMAIN_DELEGATION_NAME, namespace: secret.namespace },
      spec: { delegations: [{ secretName: secret.name, targetNamespaces: [...namespaces] }] },
    }) as KubernetesObject,
};
