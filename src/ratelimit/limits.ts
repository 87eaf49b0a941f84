/**
 * Which limits apply to a check: the loaded policies indexed by domain, and the rule that picks a
 * key's limits (DESIGN.md, "RateLimitPolicy"):
 *
 *   1. an override for the key's id, if the policy has one (negotiated Enterprise limits, spec §8);
 *   2. else the plan the gateway sent in the `plan` entry, if the policy has that plan;
 *   3. else the policy's `defaultPlan` (a missing or unknown plan).
 *
 * A domain no policy names, and a descriptor without `key_id`, are not limited (as in Envoy's own
 * rate-limit service, a descriptor that matches no configured limit is answered OK).
 * Pure: no I/O.
 */
import { DESCRIPTOR_KEY_ID, DESCRIPTOR_PLAN } from '../api/ratelimitpolicy.js';
import type { CompiledPolicy } from './config-schema.js';

export interface WindowLimits {
  /** Requests per clock minute. */
  readonly perMinute: number;
  /** Requests per UTC day. */
  readonly perDay: number;
}

/** The ban rule of a policy. */
export interface BanRule {
  /** Banned when more than this many requests arrive while limited. */
  readonly afterRejectedRequests: number;
  /** Milliseconds. */
  readonly durationMs: number;
}

/** A loaded policy in the shape lookups need. */
export interface IndexedPolicy {
  readonly domain: string;
  readonly uid: string;
  readonly generation: number;
  readonly plans: ReadonlyMap<string, WindowLimits>;
  readonly defaultPlan: string;
  readonly overrides: ReadonlyMap<string, WindowLimits>;
  readonly ban: BanRule | undefined;
}

/** Where a key's limits came from. */
export type LimitSource = 'override' | 'plan' | 'defaultPlan';

export type LimitLookup =
  | { readonly kind: 'unknownDomain' }
  | { readonly kind: 'noKeyId' }
  | {
      readonly kind: 'limited';
      readonly keyId: string;
      /** The plan whose limits apply (for an override: the plan the key has, or the default). */
      readonly plan: string;
      readonly source: LimitSource;
      readonly limits: WindowLimits;
      readonly ban: BanRule | undefined;
    };

/**
 * A descriptor entry as Envoy sends it (envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry);
 * an unset field (proto-loader leaves it out) counts as empty.
 */
export interface DescriptorEntry {
  readonly key?: string;
  readonly value?: string;
}

/** Indexes one compiled policy. */
export function indexPolicy(policy: CompiledPolicy): IndexedPolicy {
  return {
    domain: policy.domain,
    uid: policy.uid,
    generation: policy.generation,
    plans: new Map(
      policy.plans.map((p) => [p.name, { perMinute: p.requestsPerMinute, perDay: p.requestsPerDay }]),
    ),
    defaultPlan: policy.defaultPlan,
    overrides: new Map(
      policy.overrides.map((o) => [o.keyId, { perMinute: o.requestsPerMinute, perDay: o.requestsPerDay }]),
    ),
    ban:
      policy.ban === undefined
        ? undefined
        : {
            afterRejectedRequests: policy.ban.afterRejectedRequests,
            durationMs: policy.ban.durationSeconds * 1000,
          },
  };
}

/** The value of the first entry with `key` ('' when that entry has no value), or undefined. */
function entryValue(entries: readonly DescriptorEntry[], key: string): string | undefined {
  for (const e of entries) if (e.key === key) return e.value ?? '';
  return undefined;
}

/** Picks the limits for one descriptor of a check on `policy` (undefined: no policy for the domain). */
export function lookupLimits(
  policy: IndexedPolicy | undefined,
  entries: readonly DescriptorEntry[],
): LimitLookup {
  if (policy === undefined) return { kind: 'unknownDomain' };
  const keyId = entryValue(entries, DESCRIPTOR_KEY_ID);
  if (keyId === undefined || keyId === '') return { kind: 'noKeyId' };
  const sent = entryValue(entries, DESCRIPTOR_PLAN);
  const planLimits = sent === undefined ? undefined : policy.plans.get(sent);
  const plan = planLimits === undefined ? policy.defaultPlan : (sent ?? policy.defaultPlan);
  const override = policy.overrides.get(keyId);
  if (override !== undefined) {
    return { kind: 'limited', keyId, plan, source: 'override', limits: override, ban: policy.ban };
  }
  const limits = planLimits ?? policy.plans.get(policy.defaultPlan);
  if (limits === undefined) {
    // The schema guarantees defaultPlan is a plan; this keeps the function total.
    return { kind: 'unknownDomain' };
  }
  return {
    kind: 'limited',
    keyId,
    plan,
    source: planLimits === undefined ? 'defaultPlan' : 'plan',
    limits,
    ban: policy.ban,
  };
}
