/**
 * The RateLimitPolicy API, group `portico.dev`, version `v1alpha1` (docs/ratelimits.md, "A
 * policy"). These types mirror `crds/portico.dev_ratelimitpolicies.yaml`; the CRD schema is the
 * authority.
 *
 * Also the names both sides of the rate-limit config agree on: the config ConfigMaps the operator
 * writes (`portico-ratelimit-config` and `portico-ratelimit-config-<n>`, key `config.json`; see
 * docs/adr/2026-11-25-ratelimit-config-shards.md) and the one the rate-limit service reports in
 * (`portico-ratelimit-status`); see docs/adr/2026-11-22-ratelimit-enforced-reporting.md.
 */
import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { API_VERSION, Condition } from './customdomain.js';

export const RATE_LIMIT_POLICY_KIND = 'RateLimitPolicy';
export const RATE_LIMIT_POLICY_PLURAL = 'ratelimitpolicies';

/** Default name of the first config ConfigMap (shard 0); the others are `<name>-<n>`. */
export const DEFAULT_RATELIMIT_CONFIG_NAME = 'portico-ratelimit-config';
/** Default name of the ConfigMap each rate-limit server writes its load reports into. */
export const DEFAULT_RATELIMIT_STATUS_NAME = 'portico-ratelimit-status';
/** The key of the compiled config (JSON) in the config ConfigMap. */
export const RATELIMIT_CONFIG_KEY = 'config.json';
/** Label on the config and status ConfigMaps, so a watch can select them. */
export const RATELIMIT_COMPONENT_LABEL = 'app.kubernetes.io/component';
export const RATELIMIT_COMPONENT_VALUE = 'ratelimit';

/**
 * The descriptor entry keys the gateway sends (docs/ratelimits.md, "The check the gateway sends":
 * `key_id` required, `plan` optional).
 */
export const DESCRIPTOR_KEY_ID = 'key_id';
export const DESCRIPTOR_PLAN = 'plan';
/**
 * The key of the descriptor entry that names the policy (`<namespace>/<name>`) when the gateway sends
 * one domain for every policy (Contour's `rateLimitService.domain`): the first entry of each descriptor
 * Portico writes into an HTTPProxy (docs/ratelimits.md, "Attaching to Contour").
 */
export const DESCRIPTOR_POLICY = 'portico.dev/policy';
/**
 * The default of the rate-limit server's `--gateway-domain`: the one domain a gateway sends for all
 * policies. It has no `/`, so no policy's domain (`<namespace>/<name>`) can be it.
 */
export const DEFAULT_GATEWAY_DOMAIN = 'portico-gateway';

export type RateLimitConditionType = 'Accepted' | 'Enforced' | 'Attached';

/**
 * One target of a policy (Gateway API policy attachment, `LocalPolicyTargetReference`): an object in
 * the policy's namespace whose gateway settings the operator keeps in step with the policy. Supported
 * today: `{group: projectcontour.io, kind: HTTPProxy}` (docs/ratelimits.md, "Attaching to Contour").
 */
export interface PolicyTargetRef {
  /** API group without version, e.g. `projectcontour.io`; `''` is the core group. */
  group: string;
  /** Kind, e.g. `HTTPProxy`. */
  kind: string;
  /** Name, in the policy's namespace. */
  name: string;
}

/** At most this many `spec.targetRefs` (the CRD's rule). */
export const MAX_TARGET_REFS = 16;

/** One plan's limits: requests per clock minute and per UTC day (docs/ratelimits.md, "A policy"). */
export interface PlanLimits {
  /** Plan name as the gateway sends it in the `plan` descriptor entry, e.g. `free`. */
  name: string;
  /** Requests admitted per clock minute. */
  requestsPerMinute: number;
  /** Requests admitted per UTC day; at least requestsPerMinute. */
  requestsPerDay: number;
}

/**
 * Negotiated limits for one API key; they replace the plan's limits for that key
 * (docs/ratelimits.md, "A policy", `overrides`).
 */
export interface KeyOverride {
  /** The API key id (never the raw key) as the gateway sends it in `key_id`. */
  keyId: string;
  requestsPerMinute: number;
  requestsPerDay: number;
}

/**
 * The temporary ban of a key that keeps sending after a 429 (docs/ratelimits.md, "Rules worth
 * knowing", under "Degraded mode (Redis down)").
 */
export interface BanSpec {
  /** A key is banned when it sends more than this many requests while limited. */
  afterRejectedRequests: number;
  /** Go-style duration (`15m`, `1h30m`, `45s`): how long the ban lasts. */
  duration: string;
}

/**
 * What a check whose descriptor has no `key_id` gets (never silently unlimited):
 * `LimitByRemoteAddress` limits it by the descriptor entry `remote_address` (Envoy's
 * `remote_address` action) with the plan's limits, and refuses it when that entry is missing too;
 * `Refuse` refuses it (OVER_LIMIT, `X-RateLimit-Limit: 0`). docs/ratelimits.md, "Checks without a
 * key id".
 */
export type MissingKeyId = 'LimitByRemoteAddress' | 'Refuse';
export const MISSING_KEY_ID_VALUES: readonly MissingKeyId[] = ['LimitByRemoteAddress', 'Refuse'];
export const DEFAULT_MISSING_KEY_ID: MissingKeyId = 'LimitByRemoteAddress';

export interface RateLimitPolicySpec {
  /** Where the gateway side is kept in step; absent or empty: the gateway is wired by hand. */
  targetRefs?: PolicyTargetRef[];
  plans: PlanLimits[];
  /** The plan of a key whose plan the gateway does not send, or sends unknown. */
  defaultPlan: string;
  overrides?: KeyOverride[];
  /** Absent: keys are never banned. */
  ban?: BanSpec;
  /** A check without `key_id`; absent means `LimitByRemoteAddress` (the CRD's default). */
  missingKeyId?: MissingKeyId;
}

export interface RateLimitPolicyStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  /** The `domain` the gateway sends for this policy: `<namespace>/<name>`. */
  domain?: string;
}

export interface RateLimitPolicy {
  apiVersion: typeof API_VERSION;
  kind: typeof RATE_LIMIT_POLICY_KIND;
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: RateLimitPolicySpec;
  status?: RateLimitPolicyStatus;
}

/**
 * The rate-limit domain of a policy, `<namespace>/<name>` (docs/ratelimits.md, "The check the
 * gateway sends"). Pure.
 */
export function policyDomain(policy: { metadata: { namespace: string; name: string } }): string {
  return `${policy.metadata.namespace}/${policy.metadata.name}`;
}
