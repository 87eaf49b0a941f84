/**
 * The Project API, group `portico.dev`, version `v1alpha1` (docs/customdomains.md, "Projects"): one
 * published project's domains in the shape of the spec's "Multi-domain configuration of a project"
 * (§2), `domains.primary` and `domains.redirects[]`. These types mirror
 * `crds/portico.dev_projects.yaml`; the CRD schema is the authority.
 */
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { normalizeDnsName } from '../domain/hostname.js';
import type { Condition, RequiredDnsRecord } from './customdomain.js';

/** A redirect's HTTP status (RFC 9110 §15.4), as CustomDomain's `spec.redirect.statusCode`. */
export type RedirectStatus = 301 | 302 | 307 | 308;

export const PROJECT_KIND = 'Project';
export const PROJECT_PLURAL = 'projects';

/**
 * The label on every CustomDomain a Project keeps: the Project's name, so that
 * `kubectl get customdomains -l portico.dev/project=<name>` lists them.
 */
export const PROJECT_LABEL = 'portico.dev/project';

/**
 * The most hostnames one Project lists: the primary, the redirects and the www counterpart together
 * (a CEL rule of the CRD refuses more). The spec leaves the maximum "not shown" (§8); 50 is what the
 * platforms teams compare with allow a project on their paid plans.
 */
export const MAX_PROJECT_HOSTNAMES = 50;

export interface ProjectRedirect {
  /** The hostname that redirects. */
  from: string;
  /** The hostname it redirects to; absent means the primary. */
  to?: string;
  /** The HTTP status; the CRD defaults it to 301. */
  status?: RedirectStatus;
}

export interface ProjectSpec {
  /** The Service in the Project's namespace that the primary routes to. */
  service: { name: string; port?: number | string };
  domains: {
    /** The hostname that serves the content. */
    primary: string;
    redirects?: ProjectRedirect[];
    /**
     * true: the primary's www counterpart (`www.<apex>` for an apex primary, the apex for a
     * `www.` primary) is a redirect to the primary with status 301, without listing it.
     */
    wwwRedirect?: boolean;
    /**
     * What the auto-generated subdomain does once the primary is Live: `Supplement` (the CRD's
     * default) keeps serving the content, `Replace` answers with a 301 redirect to the primary.
     * Until the primary is Live it serves either way.
     */
    generatedSubdomain?: GeneratedSubdomainMode;
  };
}

/** `spec.domains.generatedSubdomain` (docs/customdomains.md, "Replace or supplement"). */
export type GeneratedSubdomainMode = 'Supplement' | 'Replace';

/** The CRD's default of `spec.domains.generatedSubdomain`. */
export const DEFAULT_GENERATED_SUBDOMAIN_MODE: GeneratedSubdomainMode = 'Supplement';

/** Why the auto-generated subdomain serves or not (`status.subdomain.reason`). */
export type SubdomainReason =
  | 'Serving'
  | 'NotDeployed'
  | 'WildcardCertificatePending'
  | 'SubdomainConflict'
  | 'RouteNotAccepted'
  | 'ForeignRoute'
  /** No longer written: every routing the operator writes routes the subdomain. */
  | 'RoutingFlavorUnsupported';

/** `status.subdomain`: the auto-generated subdomain and whether it serves. */
export interface ProjectSubdomainStatus {
  /** `<label>.<apps domain>` (domain/apps-subdomain.ts). */
  hostname: string;
  /** True when the data plane took its route with the wildcard certificate. */
  serving: 'True' | 'False';
  /** What it answers now, once routed: the content, or a redirect to `redirectTo`. */
  answer?: 'Content' | 'Redirect';
  redirectTo?: string;
  reason: SubdomainReason;
  message: string;
}

/** What a hostname is to its project. */
export type ProjectDomainRole = 'Primary' | 'Redirect' | 'FormerPrimary';

/** One entry of `status.domains`. */
export interface ProjectDomainStatus {
  hostname: string;
  role: ProjectDomainRole;
  /** The name of the hostname's CustomDomain; absent while there is none. */
  customDomain?: string;
  /** Redirect: where it redirects to now. */
  redirectTo?: string;
  /** Redirect: the HTTP status. */
  statusCode?: RedirectStatus;
  /** The CustomDomain's `status.phase`. */
  phase?: string;
  /** The CustomDomain's Ready status for its current spec (Unknown while it has not reported on it). */
  ready?: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  /** The CustomDomain's `status.dnsRecords`, as it wrote them. */
  dnsRecords?: RequiredDnsRecord[];
}

export interface ProjectStatus {
  observedGeneration?: number;
  /** The hostname that serves the project's content now; absent while none does. */
  servingPrimary?: string;
  /** The auto-generated subdomain; absent when the operator runs without an apps domain. */
  subdomain?: ProjectSubdomainStatus;
  hostnameCount?: number;
  domains?: ProjectDomainStatus[];
  conditions?: Condition[];
}

export interface Project {
  apiVersion: 'portico.dev/v1alpha1';
  kind: typeof PROJECT_KIND;
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: ProjectSpec;
  status?: ProjectStatus;
}

/**
 * The www counterpart of a primary (`spec.domains.wwwRedirect`): `www.<primary>` for a primary that
 * does not start with `www.`, the primary without `www.` for one that does; undefined when that would
 * leave a name without a dot (`www.com`, which the CRD refuses). The CRD's CEL rule computes the
 * same. Pure.
 */
export function wwwCounterpart(primary: string): string | undefined {
  if (primary.startsWith('www.')) {
    const apex = primary.slice(4);
    return apex.includes('.') ? apex : undefined;
  }
  return `www.${primary}`;
}

/** Every hostname a Project lists: the primary, its www counterpart when asked for, the redirects. Pure. */
export function projectHostnames(spec: Pick<ProjectSpec, 'domains'>): string[] {
  const primary = normalizeDnsName(spec.domains.primary);
  const twin = spec.domains.wwwRedirect === true ? wwwCounterpart(primary) : undefined;
  const froms = (spec.domains.redirects ?? []).map((r) => normalizeDnsName(r.from));
  return [...new Set([primary, ...(twin === undefined ? [] : [twin]), ...froms])];
}
