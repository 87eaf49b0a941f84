/**
 * The ingress-nginx flavor of a redirect: annotations on the domain's Ingress. Pure.
 *
 * Sources (kubernetes/ingress-nginx):
 * - docs/user-guide/nginx-configuration/annotations.md, "Permanent Redirect" and "Permanent Redirect
 *   Code": `permanent-redirect` answers with a redirect instead of proxying (301 by default) and
 *   `permanent-redirect-code` sets its status.
 * - internal/ingress/annotations/redirect/redirect.go: the code is taken as given when it is within
 *   300..308 (otherwise 301), so all of 301, 302, 307 and 308 are honoured exactly. Portico uses this
 *   one annotation pair for all four: `temporal-redirect` is fixed at 302 in the releases that lack
 *   `temporal-redirect-code`.
 * - rootfs/etc/nginx/template/nginx.tmpl: the location renders `return <code> <url>;` before
 *   `proxy_pass`, and the URL may hold nginx variables: `$request_uri` is the request's path and query
 *   exactly as sent (nginx ngx_http_core_module), which keeps both.
 * - internal/ingress/annotations/parser/validators.go and kubernetes/ingress-nginx#11175: with
 *   annotation validation on (the default from controller v1.12), `permanent-redirect` must match
 *   `URLIsValidRegex`, which has no `$`; the Ingress is then refused. See
 *   `RoutingOptions.nginxRedirectKeepsPath`.
 */
import { describeStatus, targetOrigin, type RedirectIntent } from '../../routing/redirect.js';

export const NGINX_ANNOTATION_PREFIX = 'nginx.ingress.kubernetes.io/';
export const NGINX_PERMANENT_REDIRECT = `${NGINX_ANNOTATION_PREFIX}permanent-redirect`;
export const NGINX_PERMANENT_REDIRECT_CODE = `${NGINX_ANNOTATION_PREFIX}permanent-redirect-code`;

/** The annotations that make ingress-nginx answer every path of the Ingress with the redirect. */
export function nginxRedirectAnnotations(intent: RedirectIntent, keepPath: boolean): Record<string, string> {
  return {
    [NGINX_PERMANENT_REDIRECT]: `${targetOrigin(intent)}${keepPath ? '$request_uri' : ''}`,
    [NGINX_PERMANENT_REDIRECT_CODE]: String(intent.status),
  };
}

/** What the Routed condition says about the redirect in this flavor, caveats included. */
export function nginxRedirectSummary(intent: RedirectIntent, keepPath: boolean): { caveats: string[] } {
  if (keepPath) return { caveats: [] };
  return {
    caveats: [
      `path and query are not kept: ingress-nginx redirects every request to ${targetOrigin(intent)}/ with ${describeStatus(intent.status)} ` +
        '(nginxRedirectKeepsPath is off because the controller refuses $request_uri with annotation validation on)',
    ],
  };
}
