/**
 * The auto-generated subdomain of a Project (docs/customdomains.md, "The auto-generated
 * subdomain"): what the data plane should route for `<label>.<apps domain>`, and what
 * `status.subdomain` says. Pure: the Project, the facts the controller read, no clock.
 *
 * - Routed on every plan: the plan gate of custom domains does not apply (a project below Pro, or
 *   downgraded below it, keeps its subdomain).
 * - Routed once the project has had a successful deploy: the deploy gate of CustomDomain
 *   (controllers/customdomain/acceptance.ts): its Service has a ready endpoint, or the subdomain
 *   was routed before (the operator's own HTTPProxy for it exists: scale-to-zero keeps it).
 * - One route, a Contour HTTPProxy `portico-subdomain-<project>` in the project's namespace, whose
 *   TLS Secret is the wildcard certificate in the operator's namespace (`namespace/name`, which
 *   Contour accepts through the TLSCertificateDelegation the controller keeps), named only once it
 *   holds a certificate: an HTTPProxy naming a Secret it cannot use is invalid as a whole
 *   (routing/contour.ts).
 * - Supplement (default): it serves the Service. Replace: once the primary is Live (the Project's
 *   `status.servingPrimary`), it answers with a 301 to it, path and query kept; until then, and
 *   whenever no custom domain serves (a plan downgrade), it serves the Service.
 * - Two Projects with the same subdomain (two Projects in one namespace, or a hash collision of the
 *   name rule): the oldest (then the smallest `namespace/name`) has it; the other reports
 *   `SubdomainConflict` and routes nothing.
 */
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import {
  DEFAULT_GENERATED_SUBDOMAIN_MODE,
  PROJECT_LABEL,
  type Project,
  type ProjectSubdomainStatus,
  type SubdomainReason,
} from '../../api/project.js';
import {
  httpProxy,
  redirectRoute,
  serviceRoute,
  type HTTPProxy,
  type HTTPProxyRoute,
} from '../../data-planes/contour/httpproxy.js';
import type { ServicePortEntry } from '../../routing/plan.js';
import { projectOwnerReference } from './plan.js';

/** The status the Replace mode's redirect answers with (the spec's documented redirect status). */
export const SUBDOMAIN_REDIRECT_STATUS = 301;

/** The name of the HTTPProxy of a Project's subdomain, in the Project's namespace. */
export function subdomainProxyName(project: Pick<Project, 'metadata'>): string {
  return `portico-subdomain-${project.metadata.name}`;
}

/** What the plan reads besides the Project. */
export interface SubdomainFacts {
  /** `<label>.<apps domain>` of the Project's namespace (domain/apps-subdomain.ts). */
  hostname: string;
  /** The Project that has this subdomain when it is not this one (SubdomainConflict). */
  heldBy?: { namespace: string; name: string } | undefined;
  /**
   * False when the operator's routing writes no HTTPProxy (it routes the subdomain only in the
   * `contour` flavor of ingress mode); the message says what it writes instead.
   */
  routingSupported: boolean;
  /** Ready endpoints of `spec.service` now. */
  readyEndpoints: number;
  /** The ports of `spec.service`, or undefined when the Service is not cached. */
  servicePorts: readonly ServicePortEntry[] | undefined;
  /** The operator's own HTTPProxy for the subdomain as it is now (status included), if any. */
  current: HTTPProxy | undefined;
  /** The wildcard certificate: ready, and the Secret reference (`namespace/name`). */
  certificate: { ready: boolean; message: string; secretReference: string };
  /** `status.servingPrimary` as planned this reconcile: the custom domain that serves, if any. */
  servingPrimary: string | undefined;
  /** `--ingress-class-name`, written as the HTTPProxy's `spec.ingressClassName`. */
  ingressClassName?: string | undefined;
}

export interface SubdomainPlan {
  /** The HTTPProxy to apply, or undefined to have none (the current one is deleted). */
  proxy: HTTPProxy | undefined;
  status: ProjectSubdomainStatus;
  /** True when the namespace needs the wildcard Secret delegated to it (the proxy names it). */
  delegated: boolean;
}

/** The numeric port of `spec.service` (HTTPProxy takes no port names), or undefined. */
function servicePort(project: Project, ports: readonly ServicePortEntry[] | undefined): number | undefined {
  const port = project.spec.service.port ?? 80;
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  return ports?.find((p) => p.name === port)?.port;
}

/** Contour's verdict on the HTTPProxy as applied: `valid` for its current generation. */
function proxyAccepted(proxy: HTTPProxy | undefined): { valid: boolean; description: string } {
  const status = (proxy as (HTTPProxy & { status?: Record<string, unknown> }) | undefined)?.status;
  const conditions = status?.['conditions'] as
    { type?: string; status?: string; observedGeneration?: number }[] | undefined;
  const valid = conditions?.find((c) => c.type === 'Valid');
  const current =
    valid?.observedGeneration === undefined || valid.observedGeneration === proxy?.metadata.generation;
  return {
    valid: status?.['currentStatus'] === 'valid' && current && valid?.status !== 'False',
    description: typeof status?.['description'] === 'string' ? status['description'] : 'not reported yet',
  };
}

function metadataOf(project: Project): V1ObjectMeta {
  return {
    name: subdomainProxyName(project),
    namespace: project.metadata.namespace,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [PROJECT_LABEL]: project.metadata.name },
    ownerReferences: [projectOwnerReference(project)],
  };
}

/** A subdomain with no route, and why. */
function unrouted(hostname: string, reason: SubdomainReason, message: string): SubdomainPlan {
  return { proxy: undefined, delegated: false, status: { hostname, serving: 'False', reason, message } };
}

/** Why the subdomain has no route (conflict, flavor, deploy gate), or undefined when it has one. */
function blocked(project: Project, f: SubdomainFacts): SubdomainPlan | undefined {
  if (f.heldBy !== undefined)
    return unrouted(
      f.hostname,
      'SubdomainConflict',
      f.heldBy.namespace === project.metadata.namespace
        ? `Project ${f.heldBy.name}, older, in the same namespace has ${f.hostname}: a namespace has one auto-generated subdomain; delete one of the Projects`
        : `another project has ${f.hostname} (the name rule's hash collided); rename this namespace`,
    );
  if (!f.routingSupported)
    return unrouted(
      f.hostname,
      'RoutingFlavorUnsupported',
      'the operator routes auto-generated subdomains with a Contour HTTPProxy only (--ingress-flavor contour); run it so, or route the apps domain yourself',
    );
  const ours = f.current?.metadata.ownerReferences?.some(
    (r) => r.controller === true && r.uid === project.metadata.uid,
  );
  if (f.readyEndpoints === 0 && ours !== true)
    return unrouted(
      f.hostname,
      'NotDeployed',
      `Service ${project.spec.service.name} has no ready endpoint yet: the subdomain is routed after the project's first successful deploy`,
    );
  return undefined;
}

/** Where the subdomain redirects (Replace with a primary that serves), and the routes that say so. */
function routesOf(
  project: Project,
  f: SubdomainFacts,
): { routes: HTTPProxyRoute[]; redirectTo: string | undefined } | undefined {
  const mode = project.spec.domains.generatedSubdomain ?? DEFAULT_GENERATED_SUBDOMAIN_MODE;
  const redirectTo = mode === 'Replace' ? f.servingPrimary : undefined;
  if (redirectTo !== undefined)
    return {
      redirectTo,
      routes: [
        redirectRoute({
          to: redirectTo,
          status: SUBDOMAIN_REDIRECT_STATUS,
          permanent: true,
          keepsMethod: false,
        }),
      ],
    };
  const port = servicePort(project, f.servicePorts);
  if (port === undefined) return undefined;
  return { redirectTo, routes: [serviceRoute('/', { name: project.spec.service.name, port })] };
}

/** The plan of one Project's subdomain. Pure. */
export function planSubdomain(project: Project, f: SubdomainFacts): SubdomainPlan {
  const stop = blocked(project, f);
  if (stop !== undefined) return stop;
  const routed = routesOf(project, f);
  if (routed === undefined)
    return unrouted(
      f.hostname,
      'RouteNotAccepted',
      `Service ${project.spec.service.name} has no port named ${String(project.spec.service.port)}`,
    );
  const { routes, redirectTo } = routed;
  const tls = f.certificate.ready ? f.certificate.secretReference : undefined;
  const proxy = httpProxy(metadataOf(project), f.hostname, routes, {
    ...(tls ? { tlsSecretName: tls } : {}),
    ...(f.ingressClassName ? { ingressClassName: f.ingressClassName } : {}),
  });
  const base = {
    hostname: f.hostname,
    serving: 'False' as const,
    ...(redirectTo !== undefined
      ? { answer: 'Redirect' as const, redirectTo }
      : { answer: 'Content' as const }),
  };
  if (!tls)
    return {
      proxy,
      delegated: false,
      status: {
        ...base,
        reason: 'WildcardCertificatePending',
        message: `routed over HTTP only until the wildcard certificate is stored: ${f.certificate.message}`,
      },
    };
  // Contour's verdict is on the HTTPProxy as it is now; one that differs from the plan is not judged.
  const applied = f.current !== undefined && isDeepStrictEqual(f.current.spec, proxy.spec);
  const accepted = proxyAccepted(applied ? f.current : undefined);
  if (!accepted.valid)
    return {
      proxy,
      delegated: true,
      status: {
        ...base,
        reason: 'RouteNotAccepted',
        message: applied
          ? `Contour has not accepted HTTPProxy ${proxy.metadata.name}: ${accepted.description}`
          : `HTTPProxy ${proxy.metadata.name} is being written`,
      },
    };
  const wildcard = `*.${f.hostname.slice(f.hostname.indexOf('.') + 1)}`;
  return {
    proxy,
    delegated: true,
    status: {
      ...base,
      serving: 'True',
      reason: 'Serving',
      message:
        redirectTo !== undefined
          ? `https://${f.hostname} redirects to ${redirectTo} (generatedSubdomain Replace, the primary is Live)`
          : `https://${f.hostname} serves Service ${project.spec.service.name} with the certificate for ${wildcard}`,
    },
  };
}

/** The Project that holds `hostname` among `projects` with it: the oldest, then the smallest namespace/name. */
export function subdomainHolder(projects: readonly Project[]): Project | undefined {
  return [...projects].sort((a, b) => {
    const ta = Date.parse(a.metadata.creationTimestamp?.toString() ?? '') || 0;
    const tb = Date.parse(b.metadata.creationTimestamp?.toString() ?? '') || 0;
    if (ta !== tb) return ta - tb;
    const ka = `${a.metadata.namespace}/${a.metadata.name}`;
    const kb = `${b.metadata.namespace}/${b.metadata.name}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  })[0];
}
