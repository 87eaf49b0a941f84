/**
 * Which CustomDomains a Project needs, and what its status says (docs/customdomains.md, "Projects").
 * Pure: the Project, the CustomDomains of its namespace and the clock's absence are all it reads.
 *
 * One CustomDomain per hostname of the project: the primary's serves `spec.service`, each redirect's
 * answers with `redirect.to` and `redirect.statusCode`. A CustomDomain counts as the Project's when
 * its controller ownerReference names the Project's uid; one for a listed hostname with no
 * controller, or whose controller is a Project that no longer exists, is adopted (the Project
 * becomes its controller, its name is kept); one controlled by anything else is reported
 * (`Conflicted`) and never changed. A CustomDomain of the Project's whose hostname is no longer
 * listed is deleted: its traffic stops at once (the spec's §3 Remove).
 *
 * No gap when the primary changes (the spec's domains.primary pointing at another hostname): a
 * hostname's CustomDomain changes what it answers only once the new answer works. The new primary
 * serves at once; the former primary keeps serving (role `FormerPrimary`) until the new primary is
 * Live, and only then turns into its redirect; a redirect keeps its current target while that one
 * serves and the new target is not Live yet.
 */
import { createHash } from 'node:crypto';
import {
  API_VERSION,
  CUSTOM_DOMAIN_KIND,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  type CustomDomain,
  type CustomDomainSpec,
} from '../../api/customdomain.js';
import {
  PROJECT_KIND,
  PROJECT_LABEL,
  type Project,
  type RedirectStatus,
  type ProjectDomainRole,
  type ProjectDomainStatus,
  wwwCounterpart,
} from '../../api/project.js';
import type { ConditionInput } from '../../kube/conditions.js';
import { DEFAULT_REDIRECT_STATUS } from '../../routing/redirect.js';
import { normalizeDnsName } from '../../domain/hostname.js';

/** A Kubernetes object name is at most this long here: CustomDomain's CRD limits it to 63. */
const MAX_NAME_LENGTH = 63;

/**
 * The name of the CustomDomain a Project creates for `hostname`: the hostname itself (a hostname is
 * a valid object name), or, above 63 characters, its first 54 characters without a trailing '.' or
 * '-', '-' and the first 8 hex digits of its SHA-256: two hostnames never share a name but by a
 * hash collision. Pure.
 */
export function customDomainName(hostname: string): string {
  if (hostname.length <= MAX_NAME_LENGTH) return hostname;
  const hash = createHash('sha256').update(hostname).digest('hex').slice(0, 8);
  return `${hostname.slice(0, MAX_NAME_LENGTH - 9).replace(/[.-]+$/, '')}-${hash}`;
}

/** One hostname the Project lists, and what its CustomDomain should answer once it may. */
export interface WantedHostname {
  hostname: string;
  role: 'Primary' | 'Redirect';
  /** Redirect: the hostname it sends visitors to. */
  to?: string;
  /** Redirect: the HTTP status. */
  status?: RedirectStatus;
}

/**
 * Every hostname of the Project, the primary first, then its www counterpart (`wwwRedirect`), then
 * the redirects in the order of the spec. Pure.
 */
export function wantedHostnames(project: Pick<Project, 'spec'>): WantedHostname[] {
  const primary = normalizeDnsName(project.spec.domains.primary);
  const wanted: WantedHostname[] = [{ hostname: primary, role: 'Primary' }];
  const seen = new Set([primary]);
  // The www counterpart (wwwRedirect): a 301 to the primary, right after it.
  const twin = project.spec.domains.wwwRedirect === true ? wwwCounterpart(primary) : undefined;
  if (twin !== undefined) {
    wanted.push({ hostname: twin, role: 'Redirect', to: primary, status: 301 });
    seen.add(twin);
  }
  for (const r of project.spec.domains.redirects ?? []) {
    const from = normalizeDnsName(r.from);
    if (seen.has(from)) continue; // the CRD refuses this; an object stored before the rule keeps the first
    seen.add(from);
    wanted.push({
      hostname: from,
      role: 'Redirect',
      to: r.to === undefined ? primary : normalizeDnsName(r.to),
      status: r.status ?? DEFAULT_REDIRECT_STATUS,
    });
  }
  return wanted;
}

/** A change the controller makes to the cluster. */
export type DomainAction =
  | { kind: 'create'; object: CustomDomain }
  /** A replace (PUT) of the cached object, with its resourceVersion as the precondition. */
  | { kind: 'update'; object: CustomDomain }
  | { kind: 'delete'; name: string; uid: string };

export interface ProjectPlan {
  actions: DomainAction[];
  /** `status.domains`, the primary first. */
  domains: ProjectDomainStatus[];
  servingPrimary: string | undefined;
  /** The Ready condition, and Conflicted when a listed hostname has a CustomDomain another controls. */
  ready: ConditionInput;
  conflicted: ConditionInput | undefined;
}

export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

function controllerOf(domain: CustomDomain): OwnerRef | undefined {
  return (domain.metadata.ownerReferences as OwnerRef[] | undefined)?.find((r) => r.controller === true);
}

/**
 * True when the CustomDomain is Live for its current spec: Ready=True written for its current
 * generation. Pure.
 */
export function isLiveNow(domain: CustomDomain | undefined): boolean {
  if (domain === undefined || domain.metadata.deletionTimestamp) return false;
  const ready = domain.status?.conditions?.find((c) => c.type === 'Ready');
  return ready?.status === 'True' && ready.observedGeneration === domain.metadata.generation;
}

/** True when the CustomDomain serves a Service (no redirect) and is Live for that. */
function servesLive(domain: CustomDomain | undefined): boolean {
  return domain !== undefined && domain.spec.redirect === undefined && isLiveNow(domain);
}

/** The spec with the CRD's defaults filled in, for comparing. */
function normalizedSpec(spec: CustomDomainSpec): CustomDomainSpec {
  return {
    hostname: spec.hostname,
    ...(spec.redirect !== undefined
      ? {
          redirect: { to: spec.redirect.to, statusCode: spec.redirect.statusCode ?? DEFAULT_REDIRECT_STATUS },
        }
      : {}),
    ...(spec.service ? { service: { name: spec.service.name, port: spec.service.port ?? 80 } } : {}),
  };
}

function sameSpec(a: CustomDomainSpec, b: CustomDomainSpec): boolean {
  return JSON.stringify(normalizedSpec(a)) === JSON.stringify(normalizedSpec(b));
}

/** What the plan reads besides the Project and its namespace's CustomDomains. */
export interface PlanContext {
  /** True when a Project of this uid exists in the namespace (a controller that is gone can be replaced). */
  projectExists: (uid: string) => boolean;
}

/** Which CustomDomain answers each hostname, and the hostnames Portico cannot take. */
interface Holders {
  current: Map<string, CustomDomain>;
  /** Hostname → the CustomDomain another object controls. */
  conflicts: Map<string, CustomDomain>;
  /** Hostnames whose CustomDomain name is taken by a CustomDomain of another hostname. */
  nameTaken: Set<string>;
}

/**
 * The controller owner reference to `project` that every object the Project controller writes
 * carries (its CustomDomains, its subdomain's route): deleted with the Project by the garbage collector.
 */
export function projectOwnerReference(project: Project): OwnerRef {
  return {
    apiVersion: API_VERSION,
    kind: PROJECT_KIND,
    name: project.metadata.name,
    uid: project.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The CustomDomain of each wanted hostname: the Project's own, else one to adopt; else a conflict. */
function findHolders(
  wanted: readonly WantedHostname[],
  byName: readonly CustomDomain[],
  isOurs: (d: CustomDomain) => boolean,
  adoptable: (d: CustomDomain) => boolean,
): Holders {
  const holders: Holders = { current: new Map(), conflicts: new Map(), nameTaken: new Set() };
  for (const w of wanted) {
    const candidates = byName.filter((d) => normalizeDnsName(d.spec.hostname) === w.hostname);
    const mine =
      candidates.find(isOurs) ?? candidates.find((d) => adoptable(d) && !d.metadata.deletionTimestamp);
    const foreign = candidates.find((d) => !adoptable(d) && !isOurs(d));
    if (mine !== undefined) holders.current.set(w.hostname, mine);
    else if (foreign !== undefined) holders.conflicts.set(w.hostname, foreign);
    else if (byName.some((d) => d.metadata.name === customDomainName(w.hostname)))
      holders.nameTaken.add(w.hostname);
  }
  return holders;
}

/** What one hostname's CustomDomain should answer now, and its role. */
function desiredSpec(
  w: WantedHostname,
  project: Project,
  holders: Holders,
  domains: readonly CustomDomain[],
  primaryLive: boolean,
): { spec: CustomDomainSpec; role: ProjectDomainRole } {
  const existing = holders.current.get(w.hostname);
  if (w.role === 'Primary')
    return { spec: { hostname: w.hostname, service: { ...project.spec.service } }, role: 'Primary' };
  // A redirect source that serves now is the primary before a switch: it serves until the
  // primary is Live.
  if (existing !== undefined && existing.spec.redirect === undefined && !primaryLive)
    return { spec: existing.spec, role: 'FormerPrimary' };
  let to = w.to ?? '';
  const currentTo = existing?.spec.redirect?.to;
  const servesNow = (h: string): boolean =>
    servesLive(holders.current.get(h) ?? domains.find((d) => normalizeDnsName(d.spec.hostname) === h));
  // The current target is kept while it serves and the new one does not yet.
  if (currentTo !== undefined && currentTo !== to && !servesNow(to) && servesNow(currentTo)) to = currentTo;
  return {
    spec: { hostname: w.hostname, redirect: { to, statusCode: w.status ?? DEFAULT_REDIRECT_STATUS } },
    role: 'Redirect',
  };
}

/** The status entry of a hostname without a CustomDomain Portico can use. */
function blockedEntry(entry: ProjectDomainStatus, holders: Holders): ProjectDomainStatus {
  const holder = holders.conflicts.get(entry.hostname);
  if (holder !== undefined) {
    const c = controllerOf(holder);
    return {
      ...entry,
      customDomain: holder.metadata.name,
      reason: 'ControlledElsewhere',
      message: `CustomDomain ${holder.metadata.name} has this hostname and is controlled by ${c?.kind ?? 'another object'} ${c?.name ?? ''}; Portico does not change it. Delete it, or take the hostname out of this Project.`,
    };
  }
  return {
    ...entry,
    reason: 'NameTaken',
    message: `a CustomDomain named ${customDomainName(entry.hostname)} exists for another hostname; rename or delete it`,
  };
}

/** The status entry of a hostname from its CustomDomain. */
function observedEntry(
  entry: ProjectDomainStatus,
  existing: CustomDomain,
  upToDate: boolean,
): ProjectDomainStatus {
  const ready = existing.status?.conditions?.find((c) => c.type === 'Ready');
  const out: ProjectDomainStatus = {
    ...entry,
    customDomain: existing.metadata.name,
    phase: existing.status?.phase ?? 'Pending',
  };
  if (existing.metadata.deletionTimestamp) {
    Object.assign(out, {
      ready: 'False',
      reason: 'Deleting',
      message: 'the CustomDomain is being deleted; a new one is created once it is gone',
    });
  } else if (!upToDate || ready === undefined || ready.observedGeneration !== existing.metadata.generation) {
    Object.assign(out, {
      ready: 'Unknown',
      reason: 'Updating',
      message: 'the CustomDomain has not reported on its current spec yet',
    });
  } else {
    Object.assign(out, { ready: ready.status, reason: ready.reason, message: ready.message });
  }
  if (existing.status?.dnsRecords) out.dnsRecords = existing.status.dnsRecords;
  return out;
}

/** The Ready condition from the entries. */
function readyCondition(
  primary: string,
  entries: readonly ProjectDomainStatus[],
  notLive: readonly string[],
  primaryLive: boolean,
  liveFormer: string | undefined,
  conflicted: boolean,
): ConditionInput {
  const first = entries[0];
  const why = `${first?.reason ?? 'Pending'}${first?.message ? `: ${first.message}` : ''}`;
  if (primaryLive && notLive.length === 0) {
    const n = entries.length - 1;
    const redirects = n === 0 ? '' : `; ${n === 1 ? 'its redirect is' : `its ${n} redirects are`} Live`;
    return {
      type: 'Ready',
      status: 'True',
      reason: 'Live',
      message: `${primary} serves the project${redirects}.`,
    };
  }
  if (!primaryLive && liveFormer !== undefined)
    return {
      type: 'Ready',
      status: 'False',
      reason: 'PrimarySwitchPending',
      message: `${primary} is not Live yet (${why}); ${liveFormer}, the former primary, keeps serving until it is, then redirects to it.`,
    };
  if (!primaryLive)
    return {
      type: 'Ready',
      status: 'False',
      reason: 'PrimaryNotLive',
      message: `${primary} is not Live yet (${why}).`,
    };
  const more = notLive.length > 5 ? `, and ${notLive.length - 5} more` : '';
  return {
    type: 'Ready',
    status: 'False',
    reason: conflicted ? 'HostnameConflict' : 'RedirectsNotLive',
    message: `${primary} serves the project; not Live yet: ${notLive.slice(0, 5).join(', ')}${more}.`,
  };
}

/** The CustomDomain to create for a hostname. */
function newDomain(project: Project, hostname: string, spec: CustomDomainSpec): CustomDomain {
  return {
    apiVersion: API_VERSION,
    kind: CUSTOM_DOMAIN_KIND,
    metadata: {
      name: customDomainName(hostname),
      namespace: project.metadata.namespace,
      labels: { [PROJECT_LABEL]: project.metadata.name, [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      ownerReferences: [projectOwnerReference(project)],
    },
    spec,
  };
}

/** The replace that makes `existing` the Project's, with `spec`; undefined when it already is. */
function updatedDomain(
  project: Project,
  existing: CustomDomain,
  spec: CustomDomainSpec,
): CustomDomain | undefined {
  const ours = controllerOf(existing)?.uid === project.metadata.uid;
  const labelled = existing.metadata.labels?.[PROJECT_LABEL] === project.metadata.name;
  if (existing.metadata.deletionTimestamp || (ours && labelled && sameSpec(existing.spec, spec)))
    return undefined;
  const others = (existing.metadata.ownerReferences as OwnerRef[] | undefined)?.filter(
    (r) => r.controller !== true,
  );
  return {
    ...existing,
    metadata: {
      ...existing.metadata,
      labels: { ...existing.metadata.labels, [PROJECT_LABEL]: project.metadata.name },
      ownerReferences: [...(others ?? []), projectOwnerReference(project)],
    },
    spec,
  };
}

/** One hostname's part of the plan: its action, its status entry, and whether it is Live. */
function planHostname(
  w: WantedHostname,
  project: Project,
  holders: Holders,
  domains: readonly CustomDomain[],
  primaryLive: boolean,
): { action?: DomainAction; entry: ProjectDomainStatus; notLive?: string; liveFormer?: boolean } {
  const existing = holders.current.get(w.hostname);
  const { spec, role } = desiredSpec(w, project, holders, domains, primaryLive);
  const entry: ProjectDomainStatus = { hostname: w.hostname, role };
  if (spec.redirect) {
    entry.redirectTo = spec.redirect.to;
    entry.statusCode = spec.redirect.statusCode ?? DEFAULT_REDIRECT_STATUS;
  }
  if (existing === undefined && (holders.conflicts.has(w.hostname) || holders.nameTaken.has(w.hostname))) {
    const blocked = blockedEntry(entry, holders);
    return { entry: blocked, notLive: `${w.hostname} (${blocked.reason ?? ''})` };
  }
  if (existing === undefined)
    return {
      action: { kind: 'create', object: newDomain(project, w.hostname, spec) },
      entry: {
        ...entry,
        customDomain: customDomainName(w.hostname),
        ready: 'Unknown',
        reason: 'Creating',
        message: 'the CustomDomain is being created',
      },
      notLive: `${w.hostname} (Creating)`,
    };
  const update = updatedDomain(project, existing, spec);
  const upToDate = sameSpec(existing.spec, spec);
  const observed = observedEntry(entry, existing, upToDate);
  const live = upToDate && role !== 'FormerPrimary' && isLiveNow(existing);
  return {
    ...(update !== undefined ? { action: { kind: 'update', object: update } } : {}),
    entry: observed,
    ...(live
      ? {}
      : {
          notLive: `${w.hostname} (${role === 'FormerPrimary' ? 'FormerPrimary' : (observed.reason ?? 'Pending')})`,
        }),
    liveFormer: role === 'FormerPrimary' && servesLive(existing),
  };
}

/** True when the primary's CustomDomain serves the Project's Service and is Live for it. */
function isPrimaryLive(domain: CustomDomain | undefined, project: Project): boolean {
  return servesLive(domain) && domain?.spec.service?.name === project.spec.service.name;
}

/** The Project's CustomDomains whose hostname is no longer listed: deleted (traffic stops at once). */
function removals(
  byName: readonly CustomDomain[],
  holders: Holders,
  isOurs: (d: CustomDomain) => boolean,
): DomainAction[] {
  const kept = new Set([...holders.current.values()].map((d) => d.metadata.uid));
  return byName
    .filter((d) => isOurs(d) && !kept.has(d.metadata.uid) && !d.metadata.deletionTimestamp)
    .map((d) => ({ kind: 'delete', name: d.metadata.name, uid: d.metadata.uid ?? '' }));
}

/**
 * True when a Project may take `d` over: it has no controller, or its controller is a Project that no
 * longer exists (a Project deleted and created again, in a cluster without garbage collection).
 */
function isAdoptable(d: CustomDomain, uid: string, ctx: PlanContext): boolean {
  const c = controllerOf(d);
  if (c === undefined) return true;
  return (
    c.apiVersion === API_VERSION && c.kind === PROJECT_KIND && c.uid !== uid && !ctx.projectExists(c.uid)
  );
}

/** Conflicted while a listed hostname's CustomDomain is another's. */
function conflictedCondition(conflicts: readonly string[]): ConditionInput | undefined {
  if (conflicts.length === 0) return undefined;
  return {
    type: 'Conflicted',
    status: 'True',
    reason: 'CustomDomainControlledElsewhere',
    message: `a CustomDomain another object controls has ${conflicts.join(', ')}; Portico leaves it as it is (status.domains says which)`,
  };
}

/**
 * The plan for one Project: the CustomDomains to create, replace and delete, and the status.
 * `domains` are the CustomDomains of the Project's namespace. Pure.
 */
export function planProject(
  project: Project,
  domains: readonly CustomDomain[],
  ctx: PlanContext,
): ProjectPlan {
  const uid = project.metadata.uid ?? '';
  const isOurs = (d: CustomDomain): boolean => controllerOf(d)?.uid === uid;
  const adoptable = (d: CustomDomain): boolean => isAdoptable(d, uid, ctx);
  const byName = [...domains].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const wanted = wantedHostnames(project);
  const primary = wanted[0]?.hostname ?? '';
  const holders = findHolders(wanted, byName, isOurs, adoptable);
  const primaryLive = isPrimaryLive(holders.current.get(primary), project);

  const actions: DomainAction[] = [];
  const entries: ProjectDomainStatus[] = [];
  const notLive: string[] = [];
  let liveFormer: string | undefined;
  for (const w of wanted) {
    const one = planHostname(w, project, holders, domains, primaryLive);
    if (one.action) actions.push(one.action);
    entries.push(one.entry);
    if (one.notLive !== undefined) notLive.push(one.notLive);
    if (one.liveFormer) liveFormer ??= w.hostname;
  }

  actions.push(...removals(byName, holders, isOurs));

  const conflicts = [...holders.conflicts.keys()].filter((h) => !holders.current.has(h));
  return {
    actions,
    domains: entries,
    servingPrimary: primaryLive ? primary : liveFormer,
    ready: readyCondition(primary, entries, notLive, primaryLive, liveFormer, conflicts.length > 0),
    conflicted: conflictedCondition(conflicts),
  };
}
