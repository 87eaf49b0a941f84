/**
 * The Ingress objects of a domain (ingress mode; docs/routing.md, "Modes and flavors"). Pure:
 * computes the desired objects; the controller applies them with server-side apply.
 *
 * A serving domain is one Ingress, `portico-<name>`: `/` to `spec.service`, TLS from `<name>-tls`, and
 * `/.well-known/acme-challenge/` to the operator when the challenge Service is configured. A redirect
 * domain is the same Ingress with the flavor's redirect configuration (annotations), plus, when the
 * challenge Service is configured, a second Ingress `portico-<name>-acme` that carries only the
 * challenge path: ingress-nginx and Traefik apply an Ingress's annotations to every path of that
 * Ingress, so the challenge path must live in an Ingress without them, or the redirect would answer
 * the CA's HTTP-01 request and the domain could never get its own certificate.
 */
import type {
  V1HTTPIngressPath,
  V1Ingress,
  V1IngressBackend,
  V1ObjectMeta,
  V1Service,
} from '@kubernetes/client-node';
import {
  API_VERSION,
  CUSTOM_DOMAIN_KIND,
  CUSTOM_DOMAIN_LABEL,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ownedNames,
  type CustomDomain,
} from '../api/customdomain.js';
import type { RoutingOptions } from './options.js';

/** The path prefix of ACME HTTP-01 challenges (RFC 8555 §8.3). */
export const HTTP01_PATH_PREFIX = '/.well-known/acme-challenge/';
/** The per-namespace Service that forwards HTTP-01 challenge requests to the operator. */
export const HTTP01_SERVICE_NAME = 'portico-acme-http01';
/**
 * The backend named by a redirect rule when the domain has neither `spec.service` nor a challenge
 * Service: an Ingress path must name a Service, and ingress-nginx answers the redirect before it
 * would proxy (its `return` comes first in the location). No such Service exists.
 */
export const REDIRECT_PLACEHOLDER_SERVICE_NAME = 'portico-redirect-only';

/**
 * The name of the challenge-only Ingress of a redirect domain: `portico--acme-<name>`. It cannot be
 * the serving Ingress name of any CustomDomain (`portico-<name>`, ownedNames): that would need a
 * CustomDomain named `-acme-…`, and a Kubernetes object name starts with a letter or digit (RFC
 * 1123 label names; docs/routing.md, "Modes and flavors"). The earlier `portico-<name>-acme` was
 * also the serving Ingress of a domain named `<name>-acme`.
 */
export function challengeIngressName(domain: Pick<CustomDomain, 'metadata'>): string {
  return `portico--acme-${domain.metadata.name}`;
}

/**
 * The name the challenge-only Ingress had before `challengeIngressName`, `portico-<name>-acme`:
 * removed when found, but only when its owner label names this domain (it may be the serving
 * Ingress of a domain named `<name>-acme`).
 */
export function legacyChallengeIngressName(domain: Pick<CustomDomain, 'metadata'>): string {
  return `${ownedNames(domain).ingress}-acme`;
}

/** The labels and owner reference every owned object carries. */
export function ownedMetadata(domain: CustomDomain, name: string): V1ObjectMeta {
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

function challengePath(options: RoutingOptions): V1HTTPIngressPath[] {
  if (!options.http01Service) return [];
  return [
    {
      path: HTTP01_PATH_PREFIX,
      pathType: 'Prefix',
      backend: serviceBackend(HTTP01_SERVICE_NAME, options.http01Service.port),
    },
  ];
}

/**
 * The Ingress that serves `spec.hostname` from `spec.service` over TLS from the domain's Secret.
 * Returns undefined when the domain has no service to route to.
 */
export function desiredIngress(domain: CustomDomain, options: RoutingOptions): V1Ingress | undefined {
  const service = domain.spec.service;
  if (!service) return undefined;
  const paths: V1HTTPIngressPath[] = [
    ...challengePath(options),
    { path: '/', pathType: 'Prefix', backend: serviceBackend(service.name, service.port ?? 80) },
  ];
  return ingress(domain, options, ownedNames(domain).ingress, paths, true);
}

/** Which Service a redirect rule names, and why (Ingress paths must name one; see each flavor). */
export interface RedirectBackend {
  name: string;
  port: number | string;
  source: 'service' | 'challenge' | 'placeholder';
}

/** `spec.service` when set; else the challenge Service when configured; else a placeholder name. */
export function redirectBackend(domain: CustomDomain, options: RoutingOptions): RedirectBackend {
  const service = domain.spec.service;
  if (service) return { name: service.name, port: service.port ?? 80, source: 'service' };
  if (options.http01Service)
    return { name: HTTP01_SERVICE_NAME, port: options.http01Service.port, source: 'challenge' };
  return { name: REDIRECT_PLACEHOLDER_SERVICE_NAME, port: 80, source: 'placeholder' };
}

/**
 * The Ingress that answers `spec.hostname` with the redirect the flavor's `annotations` configure:
 * one path `/` to `backend` (by default `redirectBackend`; a flavor may name its own), TLS from the
 * domain's Secret (the redirect domain has its own certificate).
 */
export function desiredRedirectIngress(
  domain: CustomDomain,
  options: RoutingOptions,
  annotations: Record<string, string>,
  backend: Pick<RedirectBackend, 'name' | 'port'> = redirectBackend(domain, options),
): V1Ingress {
  const paths: V1HTTPIngressPath[] = [
    { path: '/', pathType: 'Prefix', backend: serviceBackend(backend.name, backend.port) },
  ];
  const obj = ingress(domain, options, ownedNames(domain).ingress, paths, true);
  obj.metadata = { ...obj.metadata, annotations };
  return obj;
}

/**
 * The challenge-only Ingress of a redirect domain (`portico-<name>-acme`), or undefined when the
 * challenge Service is not configured. No TLS: the CA connects on port 80 (RFC 8555 §8.3).
 */
export function desiredChallengeIngress(
  domain: CustomDomain,
  options: RoutingOptions,
): V1Ingress | undefined {
  const paths = challengePath(options);
  if (paths.length === 0) return undefined;
  return ingress(domain, options, challengeIngressName(domain), paths, false);
}

function ingress(
  domain: CustomDomain,
  options: RoutingOptions,
  name: string,
  paths: V1HTTPIngressPath[],
  tls: boolean,
): V1Ingress {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: ownedMetadata(domain, name),
    spec: {
      ...(options.ingressClassName ? { ingressClassName: options.ingressClassName } : {}),
      ...(tls ? { tls: [{ hosts: [domain.spec.hostname], secretName: ownedNames(domain).secret }] } : {}),
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
