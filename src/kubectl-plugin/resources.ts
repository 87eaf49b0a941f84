/**
 * What `kubectl portico status` prints about a RateLimitPolicy and a Project, and the `-o json|yaml`
 * form of every status report. Pure: the object, its Events and the clock are values; no I/O. Each
 * `…Report` is the one model the text and the `-o json|yaml` output are drawn from.
 */
import { stringify } from 'yaml';
import type { RequiredDnsRecord } from '../api/customdomain.js';
import type { Project, ProjectDomainRole, ProjectStatus, RedirectStatus } from '../api/project.js';
import {
  DEFAULT_MISSING_KEY_ID,
  policyDomain,
  type BanSpec,
  type KeyOverride,
  type MissingKeyId,
  type PlanLimits,
  type PolicyTargetRef,
  type RateLimitPolicy,
} from '../api/ratelimitpolicy.js';
import {
  columns,
  conditionLines,
  conditionRows,
  eventLines,
  eventRows,
  wantedLines,
  type ConditionRow,
  type DomainEvent,
  type EventRow,
} from './format.js';

/** The order a policy's conditions are shown in (docs/ratelimits.md, "Conditions"). */
export const POLICY_CONDITION_ORDER = ['Accepted', 'Enforced', 'Attached'] as const;

/** The CRD's default redirect status (crds/portico.dev_projects.yaml). */
const DEFAULT_REDIRECT_STATUS: RedirectStatus = 301;

/**
 * The fields of `status` not in `known`, as written: what an operator newer than this plugin
 * reports (a report shows them rather than dropping them). Pure.
 */
export function otherStatusFields(
  status: object | undefined,
  known: readonly string[],
): Record<string, unknown> {
  return Object.fromEntries(Object.entries(status ?? {}).filter(([key]) => !known.includes(key)));
}

/** `report` as `-o json` (2-space JSON) or `-o yaml` (YAML 1.2, keys as in JSON) prints it. Pure. */
export function serializeReport(report: object, output: 'json' | 'yaml'): string {
  return output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : stringify(report, { lineWidth: 0 });
}

/** A value of an unknown status field on one line: scalars as they are, the rest as JSON. */
function inline(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : JSON.stringify(value);
}

function otherStatusLines(other: Record<string, unknown>): string[] {
  const entries = Object.entries(other);
  if (entries.length === 0) return [];
  return [
    'Other status (fields this plugin does not know, as the operator wrote them):',
    ...columns(entries.map(([key, value]) => [`${key}:`, inline(value)])),
    '',
  ];
}

function generationLine(generation: number | undefined, observed: number | undefined): string {
  return generation === undefined ? '' : ` (generation ${generation}, observed ${observed ?? '-'})`;
}

/** The model of `kubectl portico status ratelimitpolicy`; `-o json|yaml` prints it as it is. */
export interface PolicyReport {
  namespace: string;
  name: string;
  /** The rate-limit domain the gateway sends: `status.domain`, else `<namespace>/<name>`. */
  domain: string;
  generation: number | undefined;
  observedGeneration: number | undefined;
  defaultPlan: string;
  plans: PlanLimits[];
  overrides: KeyOverride[];
  /** Absent: keys are never banned. */
  ban: BanSpec | undefined;
  missingKeyId: MissingKeyId;
  targetRefs: PolicyTargetRef[];
  conditions: ConditionRow[];
  otherStatus: Record<string, unknown>;
  events: EventRow[];
}

/** The model of `status` for `policy` with its `events` (any order). Pure. */
export function policyReport(
  policy: RateLimitPolicy,
  events: readonly DomainEvent[],
  now: Date,
): PolicyReport {
  const status = policy.status ?? {};
  return {
    namespace: policy.metadata.namespace,
    name: policy.metadata.name,
    domain: status.domain ?? policyDomain(policy),
    generation: policy.metadata.generation,
    observedGeneration: status.observedGeneration,
    defaultPlan: policy.spec.defaultPlan,
    plans: policy.spec.plans,
    overrides: policy.spec.overrides ?? [],
    ban: policy.spec.ban,
    missingKeyId: policy.spec.missingKeyId ?? DEFAULT_MISSING_KEY_ID,
    targetRefs: policy.spec.targetRefs ?? [],
    conditions: conditionRows(status.conditions ?? [], POLICY_CONDITION_ORDER, now),
    otherStatus: otherStatusFields(status, ['observedGeneration', 'conditions', 'domain']),
    events: eventRows(events, now),
  };
}

/** A policy's `status` as plain text. Pure. */
export function formatPolicyStatus(report: PolicyReport): string {
  const plans = columns([
    ['PLAN', 'PER MINUTE', 'PER DAY'],
    ...report.plans.map((p) => [
      p.name === report.defaultPlan ? `${p.name} (default)` : p.name,
      String(p.requestsPerMinute),
      String(p.requestsPerDay),
    ]),
  ]);
  const overrides =
    report.overrides.length === 0
      ? ['Overrides: none']
      : [
          'Overrides (replace the plan for one key):',
          ...columns([
            ['KEY ID', 'PER MINUTE', 'PER DAY'],
            ...report.overrides.map((o) => [o.keyId, String(o.requestsPerMinute), String(o.requestsPerDay)]),
          ]),
        ];
  const targets =
    report.targetRefs.length === 0
      ? ['Targets: none (the gateway is wired by hand)']
      : [
          'Targets:',
          ...report.targetRefs.map((t) => `  ${t.group === '' ? '' : `${t.group}/`}${t.kind} ${t.name}`),
        ];
  const lines = [
    `RateLimitPolicy ${report.namespace}/${report.name}: domain ${report.domain}${generationLine(report.generation, report.observedGeneration)}`,
    '',
    ...conditionLines(report.conditions),
    '',
    `Plans (default: ${report.defaultPlan}):`,
    ...plans,
    ...overrides,
    report.ban === undefined
      ? 'Ban: none (keys are never banned)'
      : `Ban: a key that sends more than ${report.ban.afterRejectedRequests} requests while limited is banned for ${report.ban.duration}`,
    `Checks without key_id: ${report.missingKeyId}`,
    ...targets,
    '',
    ...otherStatusLines(report.otherStatus),
    ...eventLines(report.events),
  ];
  return `${lines.join('\n')}\n`;
}

/** One hostname of a project as `status` shows it: the operator's `status.domains` entry. */
export interface ProjectHostnameRow {
  hostname: string;
  role: ProjectDomainRole | undefined;
  customDomain: string | undefined;
  redirectTo: string | undefined;
  statusCode: RedirectStatus | undefined;
  phase: string | undefined;
  ready: string | undefined;
  reason: string | undefined;
  message: string | undefined;
  /** The records to create at the customer's DNS provider, as the CustomDomain wrote them. */
  dnsRecords: RequiredDnsRecord[];
}

/** The model of `kubectl portico status project`; `-o json|yaml` prints it as it is. */
export interface ProjectReport {
  namespace: string;
  name: string;
  generation: number | undefined;
  observedGeneration: number | undefined;
  service: Project['spec']['service'];
  /** `spec.domains.primary`: the hostname that is to serve. */
  primary: string;
  /** `status.servingPrimary`: the hostname that serves now; undefined while none does. */
  servingPrimary: string | undefined;
  wwwRedirect: boolean;
  /** `spec.domains.redirects`, with the CRD's defaults filled in (to: the primary, status 301). */
  redirects: { from: string; to: string; status: RedirectStatus }[];
  hostnameCount: number | undefined;
  /** `status.domains`: each hostname's role, phase, Ready and DNS records; empty before the first report. */
  hostnames: ProjectHostnameRow[];
  /** The Ready condition; undefined before the operator reports one. */
  ready: ConditionRow | undefined;
  conditions: ConditionRow[];
  /** Status fields this plugin does not know (e.g. ones a newer operator writes), as written. */
  otherStatus: Record<string, unknown>;
  events: EventRow[];
}

const KNOWN_PROJECT_STATUS: readonly (keyof ProjectStatus)[] = [
  'observedGeneration',
  'servingPrimary',
  'hostnameCount',
  'domains',
  'conditions',
];

/** The model of `status` for `project` with its `events` (any order). Pure. */
export function projectReport(project: Project, events: readonly DomainEvent[], now: Date): ProjectReport {
  const status = project.status ?? {};
  const primary = project.spec.domains.primary;
  const conditions = conditionRows(status.conditions ?? [], ['Ready'], now);
  return {
    namespace: project.metadata.namespace,
    name: project.metadata.name,
    generation: project.metadata.generation,
    observedGeneration: status.observedGeneration,
    service: project.spec.service,
    primary,
    servingPrimary: status.servingPrimary,
    wwwRedirect: project.spec.domains.wwwRedirect === true,
    redirects: (project.spec.domains.redirects ?? []).map((r) => ({
      from: r.from,
      to: r.to ?? primary,
      status: r.status ?? DEFAULT_REDIRECT_STATUS,
    })),
    hostnameCount: status.hostnameCount,
    hostnames: (status.domains ?? []).map((d) => ({
      hostname: d.hostname,
      role: d.role,
      customDomain: d.customDomain,
      redirectTo: d.redirectTo,
      statusCode: d.statusCode,
      phase: d.phase,
      ready: d.ready,
      reason: d.reason,
      message: d.message,
      dnsRecords: d.dnsRecords ?? [],
    })),
    ready: conditions.find((c) => c.type === 'Ready'),
    conditions,
    otherStatus: otherStatusFields(status, KNOWN_PROJECT_STATUS),
    events: eventRows(events, now),
  };
}

function hostnameLines(report: ProjectReport): string[] {
  if (report.hostnames.length === 0) {
    const listed = [report.primary, ...report.redirects.map((r) => r.from)];
    return [`Hostnames: not reported yet (listed: ${listed.join(', ')})`];
  }
  const table = columns([
    ['HOSTNAME', 'ROLE', 'REDIRECTS TO', 'PHASE', 'READY', 'REASON'],
    ...report.hostnames.map((h) => [
      h.hostname,
      h.role ?? '-',
      h.redirectTo === undefined ? '-' : `${h.redirectTo} (${h.statusCode ?? DEFAULT_REDIRECT_STATUS})`,
      h.phase ?? '-',
      h.ready ?? '-',
      h.reason ?? '-',
    ]),
  ]);
  const lines = [`Hostnames (${report.hostnames.length}):`, table[0] ?? ''];
  report.hostnames.forEach((h, i) => {
    lines.push(table[i + 1] ?? '');
    if (h.ready !== 'True' && h.message) lines.push(`      ${h.message}`);
  });
  return lines;
}

function projectDnsLines(report: ProjectReport): string[] {
  const lines = ['DNS records to create (at the DNS provider of each hostname):'];
  for (const h of report.hostnames) {
    lines.push(`  ${h.hostname}:`);
    if (h.dnsRecords.length === 0) lines.push('    (none listed yet)');
    for (const r of h.dnsRecords) lines.push(...wantedLines(r).map((l) => `  ${l}`));
  }
  return report.hostnames.length === 0 ? [] : [...lines, ''];
}

/** A project's `status` as plain text. Pure. */
export function formatProjectStatus(report: ProjectReport): string {
  const ready = report.ready;
  const serving =
    report.servingPrimary === undefined
      ? 'none serves yet'
      : report.servingPrimary === report.primary
        ? 'serving'
        : `${report.servingPrimary} serves until it is Live`;
  const lines = [
    `Project ${report.namespace}/${report.name}${generationLine(report.generation, report.observedGeneration)}`,
    `Primary: ${report.primary} (${serving})`,
    `Ready:   ${ready === undefined ? 'not reported yet' : `${ready.status}, reason ${ready.reason}: ${ready.message}`}`,
    `Service: ${report.service.name}${report.service.port === undefined ? '' : `:${report.service.port}`}`,
    '',
    ...hostnameLines(report),
    '',
    ...projectDnsLines(report),
    ...otherStatusLines(report.otherStatus),
    ...conditionLines(report.conditions),
    '',
    ...eventLines(report.events),
  ];
  return `${lines.join('\n')}\n`;
}
