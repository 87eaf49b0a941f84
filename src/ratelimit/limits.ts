/**
 * Which limits apply to a check: the loaded policies indexed by domain, and the rule that picks a
 * key's limits (docs/ratelimits.md, "The check the gateway sends"):
 *
 *   1. an override for the key's id, if the policy has one (negotiated limits for single keys;
 * docs/ratelimits.md,
 *      "A policy", `overrides`);
 *   2. else the plan the gateway sent in the `plan` entry, if the policy has that plan;
 *   3. else the policy's `defaultPlan` (a missing or unknown plan).
 *
 * The plan sent is matched without regard to case (`Pro` is `pro`), as the namespace label
 * `portico.dev/plan` is (`planOf`, controllers/customdomain/acceptance.ts); the CRD keeps plan names
 * lowercase, so no two plans differ only by case.
 *
 * A descriptor without `key_id` (absent or empty) is never silently unlimited (docs/ratelimits.md,
 * "Checks without a key id"); its policy's `missingKeyId` decides:
 *
 *   - `LimitByRemoteAddress` (the default): limited by the client's address, the descriptor entry
 *     `remote_address` (what Envoy's `remote_address` rate-limit action sends), with the limits of the
 *     plan sent or the default plan (overrides name key ids, so none applies); its counters are apart
 *     from every key id's. Without a `remote_address` entry either, the descriptor is refused;
 *   - `Refuse`: refused.
 *
 * A domain no policy names is not limited (as in Envoy's own rate-limit service, a descriptor that
 * matches no configured limit is answered OK). Pure: no I/O.
 */
import { DESCRIPTOR_KEY_ID, DESCRIPTOR_PLAN, type MissingKeyId } from '../api/ratelimitpolicy.js';
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
  /** What a descriptor without `key_id` gets. */
  readonly missingKeyId: MissingKeyId;
}

/** The descriptor entry Envoy's `remote_address` action sends: the client's address. */
export const DESCRIPTOR_REMOTE_ADDRESS = 'remote_address';

/** Where a key's limits came from. */
export type LimitSource = 'override' | 'plan' | 'defaultPlan';

/** Whose counters a check uses: an API key's, or (without `key_id`) a client address's. */
export type CounterSubject = 'keyId' | 'remoteAddress';

export type LimitLookup =
  | { readonly kind: 'unknownDomain' }
  /** No `key_id`, and the policy's `missingKeyId` refuses it (or no `remote_address` to limit by). */
  | { readonly kind: 'noKeyId' }
  | {
      readonly kind: 'limited';
      /** The API key id, or with `subject: 'remoteAddress'` the client's address. */
      readonly keyId: string;
      readonly subject: CounterSubject;
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
      policy.plans.map((p) => [
        p.name.toLowerCase(),
        { perMinute: p.requestsPerMinute, perDay: p.requestsPerDay },
      ]),
    ),
    defaultPlan: policy.defaultPlan.toLowerCase(),
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
    missingKeyId: policy.missingKeyId ?? 'LimitByRemoteAddress',
  };
}

/** The value of the first entry with `key` ('' when that entry has no value), or undefined. */
function entryValue(entries: readonly DescriptorEntry[], key: string): string | undefined {
  for (const e of entries) if (e.key === key) return e.value ?? '';
  return undefined;
}

/** The plan a descriptor names, matched without regard to case; undefined when the policy has none. */
function planLimits(
  policy: IndexedPolicy,
  sent: string | undefined,
): { name: string; limits: WindowLimits } | undefined {
  if (sent === undefined) return undefined;
  const exact = policy.plans.get(sent);
  if (exact !== undefined) return { name: sent, limits: exact };
  const lower = sent.toLowerCase();
  const limits = policy.plans.get(lower);
  return limits === undefined ? undefined : { name: lower, limits };
}

/** The limits of `policy`'s default plan (the schema guarantees it is a plan). */
function defaultLimits(policy: IndexedPolicy): WindowLimits | undefined {
  return policy.plans.get(policy.defaultPlan);
}

/** A descriptor without `key_id`: by the policy's `missingKeyId`. */
function withoutKeyId(policy: IndexedPolicy, entries: readonly DescriptorEntry[]): LimitLookup {
  const sent = planLimits(policy, entryValue(entries, DESCRIPTOR_PLAN));
  const limits = sent?.limits ?? defaultLimits(policy);
  if (limits === undefined) return { kind: 'unknownDomain' };
  const address = entryValue(entries, DESCRIPTOR_REMOTE_ADDRESS);
  if (policy.missingKeyId === 'Refuse' || address === undefined || address === '') {
    return { kind: 'noKeyId' };
  }
  return {
    kind: 'limited',
    keyId: address,
    subject: 'remoteAddress',
    plan: sent?.name ?? policy.defaultPlan,
    source: sent === undefined ? 'defaultPlan' : 'plan',
    limits,
    ban: policy.ban,
  };
}

/** Picks the limits for one descriptor of a check on `policy` (undefined: no policy for the domain). */
export function lookupLimits(
  policy: IndexedPolicy | undefined,
  entries: readonly DescriptorEntry[],
): LimitLookup {
  if (policy === undefined) return { kind: 'unknownDomain' };
  const keyId = entryValue(entries, DESCRIPTOR_KEY_ID);
  if (keyId === undefined || keyId === '') return withoutKeyId(policy, entries);
  const sent = planLimits(policy, entryValue(entries, DESCRIPTOR_PLAN));
  const plan = sent?.name ?? policy.defaultPlan;
  const override = policy.overrides.get(keyId);
  if (override !== undefined) {
    return {
      kind: 'limited',
      keyId,
      subject: 'keyId',
      plan,
      source: 'override',
      limits: override,
      ban: policy.ban,
    };
  }
  const limits = sent?.limits ?? defaultLimits(policy);
  if (limits === undefined) {
    // The schema guarantees defaultPlan is a plan; this keeps the function total.
    return { kind: 'unknownDomain' };
  }
  return {
    kind: 'limited',
    keyId,
    subject: 'keyId',
    plan,
    source: sent === undefined ? 'defaultPlan' : 'plan',
    limits,
    ban: policy.ban,
  };
}
