/**
 * The `Enforced` condition of a RateLimitPolicy, from the load reports of the running rate-limit
 * servers (docs/ratelimits.md, "Conditions": Enforced only after every running server reports that
 * it has loaded that generation; never while a server rejected it or has not yet seen it). A report
 * counts while its heartbeat is fresh (`reportStaleAfterMs`); every fresh report must show the
 * policy's generation (and uid) loaded. See docs/adr/2026-11-22-ratelimit-enforced-reporting.md and
 * docs/adr/2026-11-27-compact-load-reports.md. A verdict changes on its own when a report goes
 * stale: the controller looks again then (`nextReportStaleAtMs`). Pure: the clock is a parameter.
 */
import {
  loadedGeneration,
  policyToken,
  REPORT_STALE_AFTER_MS,
  reportStaleAfterMs,
  type LoadReport,
  type PolicyLoadState,
} from '../../ratelimit/load-report.js';

export type EnforcedReason = 'Loaded' | 'Pending' | 'ConfigRejected' | 'NotAccepted' | 'NoRateLimitServer';

export interface EnforcedVerdict {
  readonly status: 'True' | 'False';
  readonly reason: EnforcedReason;
  readonly message: string;
}

export interface EnforcedInput {
  readonly domain: string;
  readonly uid: string;
  readonly generation: number;
  readonly accepted: boolean;
  readonly reports: readonly LoadReport[];
  /** Name of the config shard that holds the policy, if known: a shard refused whole elsewhere is not its concern. */
  readonly shard?: string;
  /** Unix ms. */
  readonly nowMs: number;
  /** `namespace/name` of the status ConfigMap, for messages. */
  readonly statusConfigMap: string;
}

/** The reports that are not stale at `nowMs` (Unix ms; `reportStaleAfterMs`). */
export function liveReports(reports: readonly LoadReport[], nowMs: number): LoadReport[] {
  return reports.filter((r) => staleAtMs(r) > nowMs);
}

/** When `report` goes stale, Unix ms (NaN when its heartbeat time does not parse: stale already). */
function staleAtMs(report: LoadReport): number {
  return Date.parse(report.heartbeatTime) + reportStaleAfterMs(report);
}

/**
 * When the first of the reports live at `nowMs` goes stale (Unix ms): the moment verdicts may change
 * with no new report; undefined when none is live.
 */
export function nextReportStaleAtMs(reports: readonly LoadReport[], nowMs: number): number | undefined {
  const times = liveReports(reports, nowMs).map(staleAtMs);
  return times.length === 0 ? undefined : Math.min(...times);
}

/** This policy's refused entry in `report`, if any (same uid). */
function refusedEntry(report: LoadReport, input: EnforcedInput): PolicyLoadState | undefined {
  const state = report.policies[input.domain];
  return state !== undefined && state.uid === input.uid ? state : undefined;
}

function rejection(live: readonly LoadReport[], input: EnforcedInput, token: string): string | undefined {
  for (const report of live) {
    const state = refusedEntry(report, input);
    if (state?.rejectedGeneration === input.generation) {
      return `rate-limit server ${report.instance} rejected generation ${input.generation}: ${state.reason ?? 'Rejected'}: ${state.message ?? ''}`;
    }
    const error = report.configError;
    const elsewhere = error?.shard !== undefined && input.shard !== undefined && error.shard !== input.shard;
    if (
      error !== undefined &&
      !elsewhere &&
      loadedGeneration(report, input.domain, input.uid, token) !== input.generation
    ) {
      return `rate-limit server ${report.instance} rejected the config document: ${error.reason}: ${error.message}`;
    }
  }
  return undefined;
}

/** The Enforced verdict for one policy. */
export function enforcedVerdict(input: EnforcedInput): EnforcedVerdict {
  const live = liveReports(input.reports, input.nowMs);
  const token = policyToken(input.uid);
  const loaded = (r: LoadReport): number | undefined => loadedGeneration(r, input.domain, input.uid, token);
  if (!input.accepted) {
    const kept = live.map(loaded).find((g) => g !== undefined);
    const keeps = kept === undefined ? '' : `; the rate-limit service keeps enforcing generation ${kept}`;
    return {
      status: 'False',
      reason: 'NotAccepted',
      message: `generation ${input.generation} is not accepted (see the Accepted condition)${keeps}`,
    };
  }
  if (live.length === 0) {
    return {
      status: 'False',
      reason: 'NoRateLimitServer',
      message: `no rate-limit server has reported in ConfigMap ${input.statusConfigMap} within three of its heartbeat intervals (${REPORT_STALE_AFTER_MS / 1000} s by default); is portico ratelimit-server running?`,
    };
  }
  const rejected = rejection(live, input, token);
  if (rejected !== undefined) return { status: 'False', reason: 'ConfigRejected', message: rejected };
  const waiting = live.filter((r) => loaded(r) !== input.generation);
  if (waiting.length === 0) {
    return {
      status: 'True',
      reason: 'Loaded',
      message: `generation ${input.generation} is loaded by ${live.length} rate-limit server(s)`,
    };
  }
  return {
    status: 'False',
    reason: 'Pending',
    message: `waiting for ${waiting.length} of ${live.length} rate-limit server(s) to load generation ${input.generation} (${waiting.map((r) => r.instance).join(', ')})`,
  };
}
