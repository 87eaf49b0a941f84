/**
 * Which RateLimitPolicies a change of the rate-limit servers' load reports concerns, so that the
 * controller looks again at those only: a heartbeat that changes nothing but its time concerns
 * none, and a server that loads one new generation concerns one policy, not all of them (an event
 * handler costs in proportion to what the event affects, not to the number of policies). Whether a
 * report is live (its heartbeat fresh) is the controller's to follow with the clock
 * (`nextReportStaleAtMs`, enforced.ts). Pure.
 */
import { isDeepStrictEqual } from 'node:util';
import type { LoadReport } from '../../ratelimit/load-report.js';

export interface ReportChanges {
  /** Every policy is concerned: a report appeared or went, or a refusal of a whole document changed. */
  readonly all: boolean;
  /** Domains (`<namespace>/<name>`) whose entry in `policies` changed in some report. */
  readonly domains: ReadonlySet<string>;
  /** `policyToken`s whose generation in `loaded` changed in some report. */
  readonly tokens: ReadonlySet<string>;
}

function changedKeys<T>(
  before: Readonly<Record<string, T>>,
  after: Readonly<Record<string, T>>,
  into: Set<string>,
): void {
  for (const key of Object.keys(before)) {
    if (!Object.hasOwn(after, key) || !isDeepStrictEqual(before[key], after[key])) into.add(key);
  }
  for (const key of Object.keys(after)) if (!Object.hasOwn(before, key)) into.add(key);
}

/** What differs between two readings of the status ConfigMap, by instance. */
export function reportChanges(before: readonly LoadReport[], after: readonly LoadReport[]): ReportChanges {
  const domains = new Set<string>();
  const tokens = new Set<string>();
  const earlier = new Map(before.map((r) => [r.instance, r]));
  const later = new Set(after.map((r) => r.instance));
  // A report came or went (or two keys name one instance: looked at whole).
  const sameInstances =
    earlier.size === before.length && later.size === after.length && earlier.size === later.size;
  if (!sameInstances) return { all: true, domains, tokens };
  for (const report of after) {
    const old = earlier.get(report.instance);
    if (old === undefined || !isDeepStrictEqual(old.configError, report.configError)) {
      return { all: true, domains, tokens };
    }
    changedKeys(old.policies, report.policies, domains);
    changedKeys(old.loaded ?? {}, report.loaded ?? {}, tokens);
  }
  return { all: false, domains, tokens };
}
