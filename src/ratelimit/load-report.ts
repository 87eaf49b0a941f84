/**
 * The load report: what one rate-limit server instance tells the operator about the config it
 * loaded, written under its own key (`<instance>.json`) in the ConfigMap `portico-ratelimit-status`
 * (docs/adr/2026-11-22-ratelimit-enforced-reporting.md). The operator sets a policy's `Enforced`
 * condition from these reports. Shared by both sides, like the config schema. Pure.
 *
 * Every policy a server enforces is one entry of `loaded`, `"<policyToken(uid)>": <generation>`
 * (about 13 bytes); only refused entries are written out in `policies`, with their reason
 * (docs/adr/2026-11-27-compact-load-reports.md). Servers before that wrote every policy in
 * `policies` (about 87 bytes each), which the operator still reads.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

/** How often a server rewrites its report when nothing changed, by default, milliseconds. */
export const HEARTBEAT_INTERVAL_MS = 30_000;
/** A report older than three of its server's heartbeat intervals is from an instance that is gone. */
export const HEARTBEATS_TO_STALE = 3;
/** The longest heartbeat interval a server may set (`--heartbeat-interval-seconds`), and counted. */
export const MAX_HEARTBEAT_INTERVAL_SECONDS = 300;
/** When the report does not give its interval (the default interval): 90 000 ms. */
export const REPORT_STALE_AFTER_MS = HEARTBEATS_TO_STALE * HEARTBEAT_INTERVAL_MS;

const policyStateSchema = z.object({
  uid: z.string(),
  /** The generation this server enforces now (absent: none). */
  loadedGeneration: z.number().int().optional(),
  /** The newest generation this server refused (absent: none refused since the one loaded). */
  rejectedGeneration: z.number().int().optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
});

export const loadReportSchema = z.object({
  instance: z.string().min(1),
  /** RFC 3339: when the report was written. */
  heartbeatTime: z.string(),
  /** Seconds between this server's heartbeats (absent from earlier servers: HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalSeconds: z.number().positive().optional(),
  /** metadata.resourceVersion of the config ConfigMap loaded last. */
  configResourceVersion: z.string().optional(),
  /** The config ConfigMaps (shards) loaded, by name: the resourceVersion of each. */
  configShards: z.record(z.string(), z.string()).optional(),
  /**
   * Config shards that were deleted while this server holds policies from them: it keeps enforcing
   * those until a ConfigMap of that name exists again (the operator re-creates it).
   */
  retainedShards: z.array(z.string()).optional(),
  /**
   * Set when a config document was refused whole; the server keeps that shard's previous policies.
   * `shard`: the ConfigMap whose document was refused (absent from servers of earlier versions).
   */
  configError: z.object({ reason: z.string(), message: z.string(), shard: z.string().optional() }).optional(),
  /**
   * By domain (`<namespace>/<name>`): the entries this server refused (servers of earlier versions:
   * every policy). Always present, possibly empty: operators of earlier versions require it.
   */
  policies: z.record(z.string(), policyStateSchema),
  /** Every policy enforced: its generation, by `policyToken(uid)` (absent from earlier servers). */
  loaded: z.record(z.string(), z.number().int()).optional(),
});

export type PolicyLoadState = z.infer<typeof policyStateSchema>;
export type LoadReport = z.infer<typeof loadReportSchema>;

/**
 * Milliseconds after its `heartbeatTime` at which a report is stale: three of its server's
 * heartbeat intervals (REPORT_STALE_AFTER_MS, 90 s, for a report that does not give its interval;
 * an interval over MAX_HEARTBEAT_INTERVAL_SECONDS counts as that).
 */
export function reportStaleAfterMs(report: Pick<LoadReport, 'heartbeatIntervalSeconds'>): number {
  const interval = report.heartbeatIntervalSeconds;
  if (interval === undefined) return REPORT_STALE_AFTER_MS;
  return HEARTBEATS_TO_STALE * Math.min(interval, MAX_HEARTBEAT_INTERVAL_SECONDS) * 1000;
}

/**
 * A policy's key in a report's `loaded`: the first 48 bits of SHA-256 of its metadata.uid, in
 * base64url (8 characters). Two of 10,000 policies share a token with a chance of about 2 in 10
 * million; a policy whose token another policy shares could show the other's generation.
 */
export function policyToken(uid: string): string {
  return createHash('sha256').update(uid).digest().subarray(0, 6).toString('base64url');
}

/**
 * The generation of the policy `domain` (with `uid`) that `report` says is enforced, if any: from its
 * refused entry when it has one (which names the generation kept), else from `loaded`, else from a
 * full entry of an earlier server. `token` is `policyToken(uid)`.
 */
export function loadedGeneration(
  report: LoadReport,
  domain: string,
  uid: string,
  token: string,
): number | undefined {
  const state = report.policies[domain];
  if (state !== undefined && state.uid === uid) return state.loadedGeneration;
  return report.loaded?.[token];
}

/** The ConfigMap data key of an instance's report. Instance names are pod names (DNS labels). */
export function reportKey(instance: string): string {
  return `${instance.replace(/[^-._a-zA-Z0-9]/g, '_')}.json`;
}

/**
 * Reads every report in the status ConfigMap's data; a value that does not parse is skipped (it is
 * from a server of another version and says nothing this operator can use).
 */
export function parseReports(data: Readonly<Record<string, string>> | undefined): LoadReport[] {
  const reports: LoadReport[] = [];
  for (const [key, text] of Object.entries(data ?? {})) {
    if (!key.endsWith('.json')) continue;
    try {
      const parsed = loadReportSchema.safeParse(JSON.parse(text));
      if (parsed.success) reports.push(parsed.data);
    } catch {
      // not JSON: skipped, see above
    }
  }
  return reports;
}
