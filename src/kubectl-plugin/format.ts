/**
 * What `kubectl portico status` and `explain` print about one CustomDomain. Pure: the domain, its
 * Events and the clock are values; no I/O. `statusReport` builds the one model both the text and
 * the `-o json` output are drawn from.
 */
import type {
  CertificateStatus,
  Condition,
  CustomDomain,
  IssuanceStatus,
  ObservedRecord,
  RequiredDnsRecord,
} from '../api/customdomain.js';
import { CUSTOM_DOMAIN_REASONS, type ReasonEntry } from '../api/reasons.js';
import { fillPlaceholders, REASON_FIXES, UNKNOWN_REASON_FIX } from './fixes.js';

/** The conditions in the order a domain passes them; the first not True holds the domain back. */
export const CONDITION_ORDER = ['Accepted', 'DNSVerified', 'CertificateReady', 'Routed', 'Ready'] as const;

/** How many of the domain's Events `status` shows. */
export const EVENT_LIMIT = 10;

/** A core/v1 Event about the domain, reduced to what is printed. */
export interface DomainEvent {
  type: string;
  reason: string;
  message: string;
  /** How many times it happened (core/v1 `count`; 1 when absent). */
  count: number;
  /** When it last happened (lastTimestamp, else eventTime, else creationTimestamp). */
  lastSeen: Date | undefined;
  /**
   * Orders Events of the same second (core/v1 timestamps have whole seconds): the Event's
   * resourceVersion as a number, which etcd makes increase with each write; 0 when unknown.
   */
  sequence?: number;
}

/**
 * A span in kubectl's style: `45s`, `3m12s`, `2h5m`, `4d3h`, `400d`. Negative spans are printed as
 * their size. Pure.
 * @param ms milliseconds
 */
export function humanDuration(ms: number): string {
  const s = Math.floor(Math.abs(ms) / 1000);
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  const d = Math.floor(h / 24);
  if (d < 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  return `${d}d`;
}

/**
 * `at` relative to `now`: `3m ago`, `in 2h5m`, `now` within a second; `-` when `at` is missing or
 * not a time. Pure.
 * @param at RFC 3339 string or Date
 */
export function relativeTime(at: string | Date | undefined, now: Date): string {
  const t = toDate(at);
  if (t === undefined) return '-';
  const ms = t.getTime() - now.getTime();
  if (Math.abs(ms) < 1000) return 'now';
  return ms < 0 ? `${humanDuration(ms)} ago` : `in ${humanDuration(ms)}`;
}

function toDate(at: string | Date | undefined): Date | undefined {
  if (at === undefined || at === '') return undefined;
  const t = at instanceof Date ? at : new Date(at);
  return Number.isNaN(t.getTime()) ? undefined : t;
}

/**
 * The condition that holds the domain back: the first of `CONDITION_ORDER` that is missing or not
 * True; undefined when all are True. A missing one is returned as `Unknown` with reason
 * `NotReported` (a domain the operator has not reconciled yet). Pure.
 */
export function holdingCondition(domain: CustomDomain): Condition | undefined {
  const conditions = domain.status?.conditions ?? [];
  for (const type of CONDITION_ORDER) {
    const c = conditions.find((x) => x.type === type);
    if (c === undefined) {
      return {
        type,
        status: 'Unknown',
        reason: 'NotReported',
        message: `The operator has not reported ${type} yet: is portico controller running and leading?`,
        lastTransitionTime: '',
      };
    }
    if (c.status !== 'True') return c;
  }
  return undefined;
}

/**
 * The time of the next certificate attempt: `status.issuance.nextAttemptTime` where the operator
 * writes it, else the time the CertificateReady message gives ("Next attempt at <RFC 3339>", or an
 * order queued "expected at <RFC 3339>"); undefined when neither names one.
 */
export function nextCertificateAttempt(domain: CustomDomain): Date | undefined {
  const recorded = toDate(domain.status?.issuance?.nextAttemptTime);
  if (recorded !== undefined) return recorded;
  const message = domain.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
  const m = /(?:Next attempt at|expected at) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)/.exec(message);
  return toDate(m?.[1]);
}

/** One condition as `status` shows it. */
export interface ConditionRow {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime: string;
  /** Since lastTransitionTime, kubectl style; `-` without one. */
  age: string;
}

/** The model of `kubectl portico status`; `-o json` prints it as it is. Times are RFC 3339. */
export interface StatusReport {
  namespace: string;
  name: string;
  hostname: string;
  phase: string;
  generation: number | undefined;
  observedGeneration: number | undefined;
  conditions: ConditionRow[];
  dns: {
    wanted: RequiredDnsRecord[];
    found: ObservedRecord[];
    result: string | undefined;
    message: string | undefined;
    checkedAt: string | undefined;
    nextCheckAt: string | undefined;
    failingSince: string | undefined;
  };
  certificate: CertificateStatus | undefined;
  /** The failed attempts in a row (`status.issuance`); undefined when none. */
  issuance: IssuanceStatus | undefined;
  nextCertificateAttemptAt: string | undefined;
  /** The last `EVENT_LIMIT`, oldest first. */
  events: (Omit<DomainEvent, 'lastSeen' | 'sequence'> & { lastSeen: string | undefined; age: string })[];
}

/**
 * The model of `status` for `domain`, with `events` (any order; the last `EVENT_LIMIT` by time are
 * kept, newest last). Pure.
 */
export function statusReport(domain: CustomDomain, events: readonly DomainEvent[], now: Date): StatusReport {
  const status = domain.status ?? {};
  return {
    namespace: domain.metadata.namespace,
    name: domain.metadata.name,
    hostname: domain.spec.hostname,
    phase: status.phase ?? 'Unknown',
    generation: domain.metadata.generation,
    observedGeneration: status.observedGeneration,
    conditions: conditionRows(status.conditions ?? [], CONDITION_ORDER, now),
    dns: {
      wanted: status.dnsRecords ?? [],
      found: status.observed?.records ?? [],
      result: status.observed?.result,
      message: status.observed?.message,
      checkedAt: status.observed?.checkedAt,
      nextCheckAt: status.observed?.nextCheckAt,
      failingSince: status.observed?.failingSince,
    },
    certificate: status.certificate,
    issuance: status.issuance,
    nextCertificateAttemptAt: nextCertificateAttempt(domain)?.toISOString(),
    events: eventRows(events, now),
  };
}

/**
 * `conditions` as `status` shows them: those of `order` first, in that order, then the others as
 * written. Pure.
 */
export function conditionRows(
  conditions: readonly Condition[],
  order: readonly string[],
  now: Date,
): ConditionRow[] {
  const byType = new Map(conditions.map((c) => [c.type, c]));
  const ordered = [
    ...order.flatMap((t) => byType.get(t) ?? []),
    ...conditions.filter((c) => !order.includes(c.type)),
  ];
  return ordered.map((c) => ({
    type: c.type,
    status: c.status,
    reason: c.reason,
    message: c.message,
    lastTransitionTime: c.lastTransitionTime,
    age: relativeAge(c.lastTransitionTime, now),
  }));
}

/** One Event as `status` shows it. */
export type EventRow = StatusReport['events'][number];

/** The last `EVENT_LIMIT` of `events` (any order) by time, newest last. Pure. */
export function eventRows(events: readonly DomainEvent[], now: Date): EventRow[] {
  return [...events]
    .sort(
      (a, b) =>
        (a.lastSeen?.getTime() ?? 0) - (b.lastSeen?.getTime() ?? 0) || (a.sequence ?? 0) - (b.sequence ?? 0),
    )
    .slice(-EVENT_LIMIT)
    .map((e) => ({
      type: e.type,
      reason: e.reason,
      message: e.message,
      count: e.count,
      lastSeen: e.lastSeen?.toISOString(),
      age: relativeAge(e.lastSeen, now),
    }));
}

/** Time since `at`, kubectl's AGE column: `5m`; `-` without a time. */
export function relativeAge(at: string | Date | undefined, now: Date): string {
  const t = toDate(at);
  return t === undefined ? '-' : humanDuration(now.getTime() - t.getTime());
}

/** Lays out rows as columns separated by two spaces; the last column is not padded. Pure. */
export function columns(rows: readonly (readonly string[])[], indent = '  '): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map(
    (row) =>
      indent + row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
  );
}

function recordLine(r: { type: string; name: string; value: string }): string {
  return `${r.type} ${r.name} -> ${r.value}`;
}

/**
 * One record to create: the record in full; where the operator wrote them, the zone and the name as
 * the DNS provider asks for it (`@` at the apex); for an apex, the A/AAAA records to create instead at
 * a provider without ALIAS/ANAME.
 */
export function wantedLines(r: RequiredDnsRecord): string[] {
  // An optional record (the DNS-01 delegation) is offered ("may add"), not asked for.
  const label = r.optional === true ? 'may add: ' : 'wanted:  ';
  const lines = [`  ${label}${recordLine(r)}  (TTL ${r.ttl}${r.note ? `; ${r.note}` : ''})`];
  if (r.zone !== undefined && r.relativeName !== undefined) {
    lines.push(`           at the DNS provider of ${r.zone}: name ${r.relativeName}`);
  }
  const alternatives = r.alternatives ?? [];
  if (alternatives.length > 0) {
    const records = alternatives.map((a) => `${a.type} ${a.relativeName} -> ${a.value}`).join(', ');
    lines.push(
      `           or instead, without ALIAS/ANAME: ${records}  (TTL ${alternatives[0]?.ttl ?? r.ttl})`,
    );
  }
  return lines;
}

function dnsLines(report: StatusReport, now: Date): string[] {
  const { dns } = report;
  const lines = ['DNS:'];
  if (dns.wanted.length === 0) lines.push('  wanted:  (none listed yet)');
  for (const r of dns.wanted) lines.push(...wantedLines(r));
  if (dns.checkedAt === undefined) {
    lines.push('  found:   not checked yet');
  } else {
    if (dns.found.length === 0) lines.push('  found:   no record');
    for (const r of dns.found) lines.push(`  found:   ${recordLine(r)}`);
    lines.push(
      `  verdict: ${dns.result ?? '-'}, checked ${relativeTime(dns.checkedAt, now)}: ${dns.message ?? ''}`,
    );
  }
  if (dns.failingSince) {
    lines.push(`  not matching since ${dns.failingSince} (${relativeTime(dns.failingSince, now)})`);
  }
  lines.push(`  next check: ${at(dns.nextCheckAt, now)}`);
  return lines;
}

/** `2026-01-02T03:04:05Z (in 5m)`, or `-`. */
export function at(time: string | undefined, now: Date): string {
  return time === undefined ? '-' : `${time} (${relativeTime(time, now)})`;
}

function certificateLines(report: StatusReport, now: Date): string[] {
  const cert = report.certificate;
  const lines = ['Certificate:'];
  if (cert === undefined) {
    lines.push('  none issued yet');
  } else {
    lines.push(
      ...columns([
        ['secret:', cert.secretName],
        ['dnsNames:', cert.dnsNames.join(', ')],
        ['issuer:', cert.issuer],
        ['serial:', cert.serialNumber],
        ['notBefore:', at(cert.notBefore, now)],
        ['notAfter:', at(cert.notAfter, now)],
        ['renewalTime:', at(cert.renewalTime, now)],
      ]),
    );
  }
  const failed = report.issuance;
  if (failed !== undefined) {
    lines.push(
      `  failed attempts: ${failed.failedAttempts}, the last ${relativeTime(failed.lastFailureTime, now)} (${failed.lastFailureReason}): ${failed.lastFailureMessage ?? ''}`,
    );
    if (failed.retryAfter) lines.push(`  CA's Retry-After: ${at(failed.retryAfter, now)}`);
  }
  lines.push(`  next attempt: ${at(report.nextCertificateAttemptAt, now)}`);
  return lines;
}

/** The Conditions block: a table, each condition's message under its row. Pure. */
export function conditionLines(conditions: readonly ConditionRow[]): string[] {
  if (conditions.length === 0) return ['Conditions: none reported yet'];
  const rows = [
    ['TYPE', 'STATUS', 'REASON', 'AGE'],
    ...conditions.map((c) => [c.type, c.status, c.reason, c.age]),
  ];
  const table = columns(rows);
  const lines = ['Conditions:', table[0] ?? ''];
  conditions.forEach((c, i) => {
    lines.push(table[i + 1] ?? '');
    if (c.message) lines.push(`      ${c.message}`);
  });
  return lines;
}

/** The Events block. Pure. */
export function eventLines(events: readonly EventRow[]): string[] {
  if (events.length === 0) return ['Events: none'];
  const rows = [
    ['AGE', 'TYPE', 'REASON', 'MESSAGE'],
    ...events.map((e) => [e.count > 1 ? `${e.age} (x${e.count})` : e.age, e.type, e.reason, e.message]),
  ];
  return [`Events (last ${EVENT_LIMIT}, newest last):`, ...columns(rows)];
}

/** `status` as plain text: one screen for a person on call. Pure. */
export function formatStatus(report: StatusReport, now: Date): string {
  const generation =
    report.generation === undefined
      ? ''
      : ` (generation ${report.generation}, observed ${report.observedGeneration ?? '-'})`;
  const lines = [
    `CustomDomain ${report.namespace}/${report.name}: ${report.hostname}`,
    `Phase: ${report.phase}${generation}`,
    '',
    ...conditionLines(report.conditions),
    '',
    ...dnsLines(report, now),
    '',
    ...certificateLines(report, now),
    '',
    ...eventLines(report.events),
  ];
  return `${lines.join('\n')}\n`;
}

/** The model of `explain`. */
export interface Explanation {
  namespace: string;
  name: string;
  hostname: string;
  /** Undefined when every condition is True (the domain is Live). */
  holding: Condition | undefined;
  /** The catalogue entry of the holding reason; undefined for a reason it does not know. */
  entry: ReasonEntry | undefined;
  /** What to do, with the domain's names filled in. */
  fix: string;
}

/** Why `domain` is not Ready and what to do, from the reason catalogue and the fixes. Pure. */
export function explain(domain: CustomDomain): Explanation {
  const holding = holdingCondition(domain);
  const reason = holding?.reason ?? 'Live';
  const entry = (CUSTOM_DOMAIN_REASONS as Record<string, ReasonEntry | undefined>)[reason];
  const names = {
    namespace: domain.metadata.namespace,
    name: domain.metadata.name,
    hostname: domain.spec.hostname,
  };
  const fix =
    holding?.reason === 'NotReported'
      ? 'Check that the operator runs and holds its Lease (`kubectl -n portico-system get pods,leases`), and its logs.'
      : fillPlaceholders(REASON_FIXES[reason] ?? UNKNOWN_REASON_FIX, names);
  return { ...names, holding, entry, fix };
}

/** `explain` as plain text. Pure. */
export function formatExplanation(e: Explanation): string {
  const head = `CustomDomain ${e.namespace}/${e.name}: ${e.hostname}`;
  if (e.holding === undefined) return `${head}\nReady: every condition is True; the domain is Live.\n`;
  const c = e.holding;
  const lines = [
    head,
    `Held back by: ${c.type}=${c.status}, reason ${c.reason}${e.entry ? ` (${e.entry.severity})` : ''}`,
    `Message:      ${c.message}`,
    `Meaning:      ${e.entry?.doc ?? 'not in the reason catalogue'}`,
    `Fix:          ${e.fix}`,
    'More:         docs/troubleshooting.md',
  ];
  return `${lines.join('\n')}\n`;
}
