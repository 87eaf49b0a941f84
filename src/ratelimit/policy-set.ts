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
 *
 * The config comes in several ConfigMaps (shards, `config-schema.ts`); each is loaded on its own and
 * the snapshot enforced is their merge (`mergeShards`): a domain found in two shards (a policy the
 * operator is moving) takes the higher generation, and a deleted shard's policies stay in force,
 * unless a shard that exists has them, until a ConfigMap of its name exists again.
 * Pure.
 */
import type { ParsedConfig, RejectedEntry } from './config-schema.js';
import { indexPolicy, type IndexedPolicy } from './limits.js';
import { policyToken, type LoadReport, type PolicyLoadState } from './load-report.js';

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
 * The per-policy part of a load report: `loaded`, each enforced policy's generation by
 * `policyToken(uid)`; `policies`, each refused entry (by domain) with its generation, its reason, and
 * the generation kept in its place, if any.
 */
export function reportPolicies(
  snapshot: PolicySnapshot,
  rejected: readonly RejectedEntry[],
): Pick<LoadReport, 'policies' | 'loaded'> {
  const loaded: Record<string, number> = {};
  for (const p of snapshot.byDomain.values()) loaded[policyToken(p.uid)] = p.generation;
  const policies: Record<string, PolicyLoadState> = {};
  for (const r of rejected) {
    if (r.domain === '') continue;
    const kept = snapshot.byDomain.get(r.domain);
    policies[r.domain] = {
      uid: r.uid,
      ...(kept !== undefined && kept.uid === r.uid ? { loadedGeneration: kept.generation } : {}),
      rejectedGeneration: r.generation,
      reason: r.reason,
      message: r.message,
    };
  }
  return { policies, loaded };
}

/** One config shard as a server holds it. */
export interface ShardState {
  readonly name: string;
  /** The shard's index (0 for `--config-name`); merge order. */
  readonly index: number;
  /** metadata.resourceVersion of the ConfigMap loaded. */
  readonly resourceVersion: string;
  /** The shard's policies in force. */
  readonly snapshot: PolicySnapshot;
  /** The entries of its last document the server refused. */
  readonly rejected: readonly RejectedEntry[];
  /** The ConfigMap was deleted; its policies stay in force until it exists again. */
  readonly deleted: boolean;
  /** Its last document was refused whole (the policies before it stay in force). */
  readonly error?: { readonly reason: string; readonly message: string };
}

/**
 * The snapshot enforced: the policies of every shard. Of two entries of one domain in shards that
 * exist, the higher generation (on a tie, the lower index); a deleted shard's entry only for a
 * domain no existing shard has.
 */
export function mergeShards(shards: Iterable<ShardState>): PolicySnapshot {
  const ordered = [...shards].sort((a, b) => a.index - b.index);
  const byDomain = new Map<string, IndexedPolicy>();
  for (const shard of ordered) {
    if (shard.deleted) continue;
    for (const policy of shard.snapshot.byDomain.values()) {
      const other = byDomain.get(policy.domain);
      if (other === undefined || other.generation < policy.generation) byDomain.set(policy.domain, policy);
    }
  }
  for (const shard of ordered) {
    if (!shard.deleted) continue;
    for (const policy of shard.snapshot.byDomain.values()) {
      if (!byDomain.has(policy.domain)) byDomain.set(policy.domain, policy);
    }
  }
  return { byDomain };
}
