/**
 * The `contour` flavor (`--ingress-flavor contour`): one HTTPProxy `portico-<name>` per domain
 * (httpproxy.ts) instead of an Ingress, which serves or redirects, with the challenge route in the
 * same object, and names the TLS Secret only once it holds a certificate. Pure.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { ownedNames, type CustomDomain } from '../../api/customdomain.js';
import {
  challengeBackend,
  classOf,
  notRouted,
  rootRoute,
  routed,
  type FlavorPlan,
  type RoutingLookups,
} from '../../routing/flavor-plan.js';
import { desiredHttp01Service, HTTP01_PATH_PREFIX, ownedMetadata } from '../../routing/ingress.js';
import type { RoutingOptions } from '../../routing/options.js';
import type { FlavorWriter } from '../types.js';
import {
  CONTOUR_API_VERSION,
  httpProxy,
  HTTPPROXY_KIND,
  redirectRoute,
  serviceRoute,
  type HTTPProxyRoute,
} from './httpproxy.js';

/**
 * The `contour` flavor: one HTTPProxy (httpproxy.ts) with the challenge route (plain HTTP allowed)
 * and the serving or redirect route; TLS from the domain's Secret once it holds a certificate. A
 * port given by name is looked up in the Service (HTTPProxy ports are numbers), as in gateway mode.
 */
function contourPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): FlavorPlan {
  const { ingress: name, secret } = ownedNames(domain);
  const routes: HTTPProxyRoute[] = [];
  if (options.http01Service)
    routes.push(serviceRoute(HTTP01_PATH_PREFIX, challengeBackend(options.http01Service), true));
  const root = rootRoute(domain, lookups, `HTTPProxy ${name} (Contour)`, {
    redirect: redirectRoute,
    forward: (backend) => serviceRoute('/', backend),
  });
  if ('plan' in root) return root.plan;
  routes.push(root.route);
  const tls = lookups.tlsSecretReady === true;
  const proxy = httpProxy(ownedMetadata(domain, name), domain.spec.hostname, routes, {
    ...classOf(options),
    ...(tls ? { tlsSecretName: secret } : {}),
  });
  const tlsSentence = tls
    ? ` TLS from Secret ${secret}.`
    : ` TLS from Secret ${secret} is added once it holds the certificate (Contour refuses an HTTPProxy whose TLS Secret is missing).`;
  const challenge = options.http01Service
    ? ` ${HTTP01_PATH_PREFIX} goes to the operator, over plain HTTP too.`
    : '';
  const service01 = desiredHttp01Service(domain, options);
  return routed(service01 ? [service01, proxy] : [proxy], root.sentence + tlsSentence + challenge, []);
}

/** The challenge Service and an HTTPProxy with the challenge route alone. */
function challengeOnly(domain: CustomDomain, options: RoutingOptions): KubernetesObject[] {
  const service = desiredHttp01Service(domain, options);
  if (!service || !options.http01Service) return [];
  const route = serviceRoute(HTTP01_PATH_PREFIX, challengeBackend(options.http01Service), true);
  const metadata = ownedMetadata(domain, ownedNames(domain).ingress);
  return [service, httpProxy(metadata, domain.spec.hostname, [route], classOf(options))];
}

/** The `contour` flavor where the API server serves no HTTPProxy: nothing can be written. */
function httpProxyUnsupported(domain: CustomDomain): FlavorPlan {
  return notRouted(
    'HTTPProxyUnsupported',
    `The operator runs with --ingress-flavor contour, but the API server does not serve HTTPProxy (${CONTOUR_API_VERSION}) to it (Contour's CRDs are not installed, or the operator's RBAC does not allow listing httpproxies), so no routing for ${domain.spec.hostname} can be written. Install Contour's CRDs (examples/contour/01-crds.yaml of the Contour release) or grant the operator get, list, watch, create, patch and delete on httpproxies.projectcontour.io, and restart the operator (it looks for the kind at start); or choose another --ingress-flavor.`,
  );
}

export const contourFlavor: FlavorWriter = {
  flavor: 'contour',
  plan: contourPlan,
  challengeOnly,
  ownedObjects: (domain) => [
    {
      apiVersion: CONTOUR_API_VERSION,
      kind: HTTPPROXY_KIND,
      metadata: { name: ownedNames(domain).ingress, namespace: domain.metadata.namespace },
    },
  ],
  requiredKind: { apiVersion: CONTOUR_API_VERSION, kind: HTTPPROXY_KIND, unserved: httpProxyUnsupported },
  needsTlsSecretReady: true,
};
