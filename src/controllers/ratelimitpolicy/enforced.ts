/**
 * The `Enforced` condition of a RateLimitPolicy, from the load reports of the running rate-limit
 * servers (issue 4: "Enforced only after the running service reports that it has loaded that
 * generation ... a policy must never show Enforced while the service rejected or has not yet seen
 * it"). A report counts while its heartbeat is fresh (REPORT_STALE_AFTER_MS); every fresh report must
 * show the policy's generation (and uid) loaded. See docs/adr/2026-11-22-ratelimit-enforced-reporting.md.
 * Pure: the clock is a parameter.
 */
import { REPORT_STALE_AFTER_MS, type LoadReport, type PolicyLoadState } from '../../ratelimit/load-report.js';

export type EnforcedReason = 'Loaded' | 'Pending' | 'ConfigRejected' | 'NotAccepted' | 'NoRateLimitServer';

export interface EnforcedVerdict {
  readonly status: 'True' | 'False';
  readonly reason: EnforcedReason;
  readonly message: string;
  /** Milliseconds until the verdict may change on its own (a report going stale); undefined: never. */
  readonly recheckAfterMs?: number;
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

function liveReports(
  reports: readonly LoadReport[],
  nowMs: number,
): { report: LoadReport; staleAtMs: number }[] {
  return reports
    .map((report) => ({ report, staleAtMs: Date.parse(report.heartbeatTime) + REPORT_STALE_AFTER_MS }))
    .filter((r) => Number.isFinite(r.staleAtMs) && r.staleAtMs > nowMs);
}

function stateOf(report: LoadReport, input: EnforcedInput): PolicyLoadState | undefined {
  const state = report.policies[input.domain];
  return state !== undefined && state.uid === input.uid ? state : undefined;
}

function rejection(live: readonly LoadReport[], input: EnforcedInput): string | undefined {
  for (const report of live) {
    const state = stateOf(report, input);
    if (state?.rejectedGeneration === input.generation) {
      return `rate-limit server ${report.instance} rejected generation ${input.generation}: ${state.reason ?? 'Rejected'}: ${state.message ?? ''}`;
    }
    const error = report.configError;
    const elsewhere = error?.shard !== undefined && input.shard !== undefined && error.shard !== input.shard;
    if (error !== undefined && !elsewhere && state?.loadedGeneration !== input.generation) {
      return `rate-limit server ${report.instance} rejected the config document: ${error.reason}: ${error.message}`;
    }
  }
  return undefined;
}

/** The Enforced verdict for one policy. */
export function enforcedVerdict(input: EnforcedInput): EnforcedVerdict {
  const live = liveReports(input.reports, input.nowMs);
  const recheck =
    live.length === 0
      ? undefined
      : Math.max(1_000, Math.min(...live.map((r) => r.staleAtMs)) - input.nowMs + 1_000);
  const withRecheck = (v: EnforcedVerdict): EnforcedVerdict =>
    recheck === undefined ? v : { ...v, recheckAfterMs: recheck };
  if (!input.accepted) {
    const loaded = live.map((r) => stateOf(r.report, input)?.loadedGeneration).find((g) => g !== undefined);
    const keeps = loaded === undefined ? '' : `; the rate-limit service keeps enforcing generation ${loaded}`;
    return withRecheck({
      status: 'False',
      reason: 'NotAccepted',
      message: `generation ${input.generation} is not accepted (see the Accepted condition)${keeps}`,
    });
  }
  if (live.length === 0) {
    return {
      status: 'False',
      reason: 'NoRateLimitServer',
      message: `no rate-limit server has reported in ConfigMap ${input.statusConfigMap} in the last ${REPORT_STALE_AFTER_MS / 1000} s; is portico ratelimit-server running?`,
    };
  }
  const rejected = rejection(
    live.map((r) => r.report),
    input,
  );
  if (rejected !== undefined)
    return withRecheck({ status: 'False', reason: 'ConfigRejected', message: rejected });
  const waiting = live.filter((r) => stateOf(r.report, input)?.loadedGeneration !== input.generation);
  if (waiting.length === 0) {
    return withRecheck({
      status: 'True',
      reason: 'Loaded',
      message: `generation ${input.generation} is loaded by ${live.length} rate-limit server(s)`,
    });
  }
  return withRecheck({
    status: 'False',
    reason: 'Pending',
    message: `waiting for ${waiting.length} of ${live.length} rate-limit server(s) to load generation ${input.generation} (${waiting.map((r) => r.report.instance).join(', ')})`,
  });
}
