/**
 * The auto-generated subdomain of a Project (docs/customdomains.md, "The auto-generated
 * subdomain"): what the data plane should route for `<label>.<apps domain>`, and what
 * `status.subdomain` says. Pure: the Project, the facts the controller read, no clock.
 *
 * - Routed on every plan: the plan gate of custom domains does not apply (a project below Pro, or
 *   downgraded below it, keeps its subdomain).
 * - Routed once the project has had a successful deploy: the deploy gate of CustomDomain
 *   (controllers/customdomain/acceptance.ts): its Service has a ready endpoint, or the subdomain
 *   was routed before (an object of its route with the Project's controller ownerReference exists:
 *   scale-to-zero keeps it).
 * - In every routing the operator writes: the objects are the flavor's (`SubdomainRouteWriter`,
 *   src/data-planes/<name>/subdomain-route.ts, and Gateway API mode's in routing/subdomain-route.ts),
 *   named `portico-subdomain-<project>` in the project's namespace; whether the data plane took them
 *   is read from their status (the route kinds' acknowledgement), and from the status of the
 *   writer's certificate access object where the data plane reports on it (gateway mode's
 *   ListenerSet with the wildcard's HTTPS listener).
 * - Supplement (default): it serves the Service. Replace: once the primary is Live (the Project's
 *   `status.servingPrimary`), it answers with a 301 to it, path and query kept; until then, and
 *   whenever no custom domain serves (a plan downgrade), it serves the Service.
 * - Two Projects with the same subdomain (two Projects in one namespace, or a hash collision of the
 *   name rule): the oldest (then the smallest `namespace/name`) has it; the other reports
 *   `SubdomainConflict` and routes nothing.
 * - Routes Portico does not own that name the subdomain (another tenant's), or that the project's
 *   own namespace has for a name under the apps domain the project does not hold (docs/routing.md,
 *   "Foreign routes"): `ForeignRoute`, its route kept; a route of another namespace is counted,
 *   never named (its namespace is another tenant's).
 */
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import {
  DEFAULT_GENERATED_SUBDOMAIN_MODE,
  PROJECT_LABEL,
  type Project,
  type ProjectSubdomainStatus,
  type SubdomainReason,
} from '../../api/project.js';
import type { SubdomainRouteWriter } from '../../data-planes/types.js';
import type { RoutingOptions } from '../../routing/options.js';
import type { ServicePortEntry } from '../../routing/plan.js';
import { combine } from '../../routing/acknowledgement.js';
import {
  certificateAccessAcknowledgement,
  subdomainAcknowledgement,
  subdomainRouteName,
} from '../../routing/subdomain-route.js';
import { projectOwnerReference } from './plan.js';

/** The status the Replace mode's redirect answers with (the spec's documented redirect status). */
export const SUBDOMAIN_REDIRECT_STATUS = 301;

/** The name of the objects of a Project's subdomain route, in the Project's namespace. */
export const subdomainProxyName = subdomainRouteName;

/** Routes Portico does not own that concern a Project's subdomain (routing/foreign-routes.ts). */
export interface SubdomainForeignRoutes {
  /** Routes of the project's own namespace naming its subdomain (`Kind namespace/name`). */
  readonly here: readonly string[];
  /** How many routes of other namespaces name it (never named: another tenant's objects). */
  readonly elsewhere: number;
  /** Routes of the project's namespace naming a name under the apps domain it does not hold. */
  readonly strays: readonly { readonly route: string; readonly hostname: string }[];
}

/** What the plan reads besides the Project. */
export interface SubdomainFacts {
  /** `<label>.<apps domain>` of the Project's namespace (domain/apps-subdomain.ts). */
  hostname: string;
  /** The Project that has this subdomain when it is not this one (SubdomainConflict). */
  heldBy?: { namespace: string; name: string } | undefined;
  /** The writer of the operator's routing (routing/subdomain-route.ts `subdomainRouteWriter`). */
  writer: SubdomainRouteWriter;
  /** The operator's routing settings (class, parent Gateways, Traefik naming, nginx path keeping). */
  options: RoutingOptions;
  /** `--data-plane-name`, for the acknowledgement's messages. */
  dataPlaneName?: string | undefined;
  /** Ready endpoints of `spec.service` now. */
  readyEndpoints: number;
  /** The ports of `spec.service`, or undefined when the Service is not cached. */
  servicePorts: readonly ServicePortEntry[] | undefined;
  /** The object of the subdomain's route of the same kind and name as `object`, as it is now (status included). */
  current: (object: KubernetesObject) => KubernetesObject | undefined;
  /** An object of the subdomain's route with this Project's controller ownerReference exists. */
  routedBefore: boolean;
  /** The wildcard certificate: ready, and its Secret. */
  certificate: { ready: boolean; message: string; secret: { namespace: string; name: string } };
  /** `status.servingPrimary` as planned this reconcile: the custom domain that serves, if any. */
  servingPrimary: string | undefined;
  /** Routes Portico does not own for the subdomain; undefined: none known. */
  foreign?: SubdomainForeignRoutes | undefined;
  /**
   * The writer's certificate access object as last applied (`planned`) and as the API server holds
   * it now (`current`, status included; undefined: not there), when its kind is one the data plane
   * reports on (gateway mode's ListenerSet): the subdomain serves only once that is taken too.
   */
  certificateAccess?: { planned: KubernetesObject; current: KubernetesObject | undefined } | undefined;
}

export interface SubdomainPlan {
  /** The objects to apply, in order; empty to have none (the current ones are deleted). */
  apply: KubernetesObject[];
  status: ProjectSubdomainStatus;
  /** The data plane has not reported on the route as applied yet (look again soon). */
  awaiting: boolean;
}

/** The numeric port of `spec.service` (HTTPProxy and HTTPRoute take no port names), or undefined. */
function servicePort(project: Project, ports: readonly ServicePortEntry[] | undefined): number | undefined {
  const port = project.spec.service.port ?? 80;
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  return ports?.find((p) => p.name === port)?.port;
}

function metadataOf(project: Project): V1ObjectMeta & { name: string; namespace: string } {
  return {
    name: subdomainRouteName(project),
    namespace: project.metadata.namespace,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [PROJECT_LABEL]: project.metadata.name },
    ownerReferences: [projectOwnerReference(project)],
  };
}

/** A subdomain with no route, and why. */
function unrouted(hostname: string, reason: SubdomainReason, message: string): SubdomainPlan {
  return { apply: [], awaiting: false, status: { hostname, serving: 'False', reason, message } };
}

/** Why the subdomain has no route (conflict, deploy gate), or undefined when it has one. */
function blocked(project: Project, f: SubdomainFacts): SubdomainPlan | undefined {
  if (f.heldBy !== undefined)
    return unrouted(
      f.hostname,
      'SubdomainConflict',
      f.heldBy.namespace === project.metadata.namespace
        ? `Project ${f.heldBy.name}, older, in the same namespace has ${f.hostname}: a namespace has one auto-generated subdomain; delete one of the Projects`
        : `another project has ${f.hostname} (the name rule's hash collided); rename this namespace`,
    );
  if (f.readyEndpoints === 0 && !f.routedBefore)
    return unrouted(
      f.hostname,
      'NotDeployed',
      `Service ${project.spec.service.name} has no ready endpoint yet: the subdomain is routed after the project's first successful deploy`,
    );
  return undefined;
}

/**
 * The `ForeignRoute` sentence: which routes Portico does not own take or share the subdomain, and
 * which of the namespace's own routes name an apps-domain name the project does not hold;
 * undefined when there are none.
 */
export function foreignRouteMessage(
  hostname: string,
  foreign: SubdomainForeignRoutes | undefined,
): string | undefined {
  if (foreign === undefined) return undefined;
  const parts: string[] = [];
  const { here, elsewhere, strays } = foreign;
  if (here.length > 0 || elsewhere > 0) {
    const named = here.length > 0 ? [`${here.join('; ')} (this namespace)`] : [];
    const counted =
      elsewhere > 0
        ? [
            `${elsewhere} route${elsewhere === 1 ? '' : 's'} of another namespace (not named: another tenant's)`,
          ]
        : [];
    parts.push(
      `${hostname} is also named by routes Portico does not own: ${[...named, ...counted].join('; and ')}. The data plane may send part or all of its traffic there, or refuse both (Contour marks duplicate HTTPProxy fqdns invalid); this project's route is kept. The platform team can find the other routes (kubectl portico, or the operator's log); a routing class of Portico's own keeps them out (docs/routing.md).`,
    );
  }
  if (strays.length > 0)
    parts.push(
      `this namespace's routes name names under the apps domain that this project does not hold: ${strays.map((s) => `${s.route} names ${s.hostname}`).join('; ')}. Names under the apps domain are the platform's: delete them or remove the hostname from them.`,
    );
  return parts.length > 0 ? parts.join(' ') : undefined;
}

/** The plan of one Project's subdomain. Pure. */
export function planSubdomain(project: Project, f: SubdomainFacts): SubdomainPlan {
  const stop = blocked(project, f);
  if (stop !== undefined) return stop;
  const port = servicePort(project, f.servicePorts);
  if (port === undefined)
    return unrouted(
      f.hostname,
      'RouteNotAccepted',
      `Service ${project.spec.service.name} has no port named ${String(project.spec.service.port)}`,
    );
  const mode = project.spec.domains.generatedSubdomain ?? DEFAULT_GENERATED_SUBDOMAIN_MODE;
  const redirectTo = mode === 'Replace' ? f.servingPrimary : undefined;
  const { apply, what } = f.writer.plan({
    metadata: metadataOf(project),
    hostname: f.hostname,
    service: { name: project.spec.service.name, port },
    ...(redirectTo !== undefined
      ? {
          redirect: {
            to: redirectTo,
            status: SUBDOMAIN_REDIRECT_STATUS,
            permanent: true,
            keepsMethod: false,
          },
        }
      : {}),
    certificate: f.certificate.ready ? f.certificate.secret : undefined,
    options: f.options,
  });
  const base = {
    hostname: f.hostname,
    serving: 'False' as const,
    ...(redirectTo !== undefined
      ? { answer: 'Redirect' as const, redirectTo }
      : { answer: 'Content' as const }),
  };
  const plan = (
    reason: SubdomainReason,
    message: string,
    serving: 'True' | 'False' = 'False',
    awaiting = false,
  ): SubdomainPlan => ({
    apply,
    awaiting,
    status: { ...base, serving, reason, message },
  });
  const foreign = foreignRouteMessage(f.hostname, f.foreign);
  if (foreign !== undefined) return plan('ForeignRoute', foreign);
  if (!f.certificate.ready)
    return plan(
      'WildcardCertificatePending',
      `${what} routes it over HTTP only until the wildcard certificate is stored: ${f.certificate.message}`,
    );
  const context = { ingressClassName: f.options.ingressClassName, dataPlaneName: f.dataPlaneName };
  const route = subdomainAcknowledgement(apply, f.current, context);
  const access =
    f.certificateAccess &&
    certificateAccessAcknowledgement(f.certificateAccess.planned, f.certificateAccess.current, context);
  const ack = access === undefined ? route : combine([route, access]);
  if (ack.kind !== 'confirmed')
    return ack.kind === 'refused'
      ? plan('RouteNotAccepted', `${ack.reason}: ${ack.message}`)
      : plan('RouteNotAccepted', ack.message, 'False', true);
  const wildcard = `*.${f.hostname.slice(f.hostname.indexOf('.') + 1)}`;
  return plan(
    'Serving',
    redirectTo !== undefined
      ? `https://${f.hostname} redirects to ${redirectTo} (generatedSubdomain Replace, the primary is Live): ${what}`
      : `https://${f.hostname} serves Service ${project.spec.service.name} with the certificate for ${wildcard}: ${what}; ${f.writer.certificateSource}`,
    'True',
  );
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
