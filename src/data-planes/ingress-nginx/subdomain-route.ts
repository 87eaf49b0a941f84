/**
 * How the `nginx` flavor writes a Project's auto-generated subdomain (docs/customdomains.md, "The
 * auto-generated subdomain"): one Ingress `portico-subdomain-<project>` (routing/subdomain-ingress.ts)
 * to the project's Service, or with ingress-nginx's permanent-redirect annotations (annotations.ts)
 * in Replace mode. Pure.
 *
 * The certificate is ingress-nginx's default certificate: an Ingress TLS entry without a
 * `secretName` is served with the certificate of the controller's `--default-ssl-certificate
 * <namespace>/<name>` (kubernetes/ingress-nginx docs/user-guide/tls.md, "Default SSL Certificate"),
 * which the platform points at the wildcard Secret; the key stays in the operator's namespace. Portico
 * cannot set a controller flag, so nothing is written for it (no `certificateAccess`).
 */
import { subdomainIngress } from '../../routing/subdomain-ingress.js';
import type { SubdomainRouteWriter } from '../types.js';
import { nginxRedirectAnnotations } from './annotations.js';

export const nginxSubdomainRoute: SubdomainRouteWriter = {
  flavor: 'nginx',
  plan: (input) => {
    const keepsPath = input.options.nginxRedirectKeepsPath ?? true;
    const annotations = input.redirect ? nginxRedirectAnnotations(input.redirect, keepsPath) : undefined;
    return {
      apply: [subdomainIngress(input, annotations)],
      what: `Ingress ${input.metadata.name} (ingress-nginx)`,
    };
  },
  owned: (metadata) => [{ apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', metadata }],
  certificateSource:
    'the Ingress lists the subdomain in spec.tls without a Secret, so ingress-nginx serves its --default-ssl-certificate, which the platform sets to the wildcard Secret (<operator namespace>/portico-apps-domain-tls)',
};
