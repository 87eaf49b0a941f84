/**
 * The policies a server enforces: an immutable snapshot, replaced whole when a config loads. A check
 * reads the snapshot once when it starts, so a reload never splits a check between two configs; and
 * counters live in Redis under keys that do not depend on the config, so a reload neither drops nor
 * counts a request twice.
 *
 * Loading rules:
 * - every valid entry of the new document is enforced;
 * - an entry the server refuses keeps the version of that policy already enforced, if any (same
 *   uid), and is reported as refused, so a bad edit never lifts a limit;
 * - a policy no longer in the document is dropped (the policy was deleted).
 * Pure.
 */
import type { ParsedConfig, RejectedEntry } from './config-schema.js';
import { indexPolicy, type IndexedPolicy } from './limits.js';
import type { LoadReport, PolicyLoadState } from './load-report.js';

export interface PolicySnapshot {
  readonly byDomain: ReadonlyMap<string, IndexedPolicy>;
}

export const EMPTY_SNAPSHOT: PolicySnapshot = { byDomain: new Map() };

export interface LoadResult {
  readonly snapshot: PolicySnapshot;
  readonly rejected: readonly RejectedEntry[];
}

/** The snapshot after loading `parsed` on top of `previous`. */
export function loadPolicies(previous: PolicySnapshot, parsed: ParsedConfig): LoadResult {
  const byDomain = new Map<string, IndexedPolicy>();
  for (const policy of parsed.policies) byDomain.set(policy.domain, indexPolicy(policy));
  for (const entry of parsed.rejected) {
    const kept = previous.byDomain.get(entry.domain);
    if (kept !== undefined && kept.uid === entry.uid && !byDomain.has(entry.domain)) {
      byDomain.set(entry.domain, kept);
    }
  }
  return { snapshot: { byDomain }, rejected: parsed.rejected };
}

/**
 * The per-policy part of a load report: each enforced policy's generation, and each refused entry's
 * generation with its reason.
 */
export function reportPolicies(
  snapshot: PolicySnapshot,
  rejected: readonly RejectedEntry[],
): LoadReport['policies'] {
  const policies: Record<string, PolicyLoadState> = {};
  for (const p of snapshot.byDomain.values()) {
    policies[p.domain] = { uid: p.uid, loadedGeneration: p.generation };
  }
  for (const r of rejected) {
    if (r.domain === '') continue;
    const loaded = policies[r.domain];
    policies[r.domain] = {
      uid: r.uid,
      ...(loaded !== undefined && loaded.uid === r.uid && loaded.loadedGeneration !== undefined
        ? { loadedGeneration: loaded.loadedGeneration }
        : {}),
      rejectedGeneration: r.generation,
      reason: r.reason,
      message: r.message,
    };
  }
  return policies;
}
