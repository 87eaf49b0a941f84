/**
 * Compilation of RateLimitPolicies into the rate-limit service's config (issue 4, "Compilation in
 * the operator"), the desired-state step of the controller: pure, unit-tested, no I/O.
 *
 * A policy compiles into one entry of `config.json` (`CompiledPolicy`, the schema shared with the
 * server). The checks are the CRD's, run again here with the same messages, because a CRD rule does not
 * re-check objects stored before it existed (and Helm does not upgrade CRDs). A policy that fails them
 * is not Accepted; the service keeps enforcing the entry already in the ConfigMap for it, if any, so a
 * bad edit never lifts a limit.
 */
import { policyDomain, type RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import {
  compiledPolicySchema,
  MAX_BAN_SECONDS,
  parseCompiledConfig,
  renderCompiledConfig,
  type CompiledPolicy,
} from '../../ratelimit/config-schema.js';
import { parseDurationSeconds } from './duration.js';

const PLAN_NAME = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

export type CompileResult =
  { readonly ok: true; readonly entry: CompiledPolicy } | { readonly ok: false; readonly message: string };

function banOf(policy: RateLimitPolicy, problems: string[]): CompiledPolicy['ban'] {
  const ban = policy.spec.ban;
  if (ban === undefined) return undefined;
  const seconds = parseDurationSeconds(ban.duration);
  if (seconds === undefined) {
    problems.push(
      `ban.duration: "${ban.duration}" must be hours, minutes and seconds such as 15m, 1h30m or 45s`,
    );
    return undefined;
  }
  if (seconds < 1 || seconds > MAX_BAN_SECONDS) {
    problems.push('ban.duration: must be from 1s to 168h (7 days)');
    return undefined;
  }
  return { afterRejectedRequests: ban.afterRejectedRequests, durationSeconds: seconds };
}

/** Compiles one policy; on failure, the message lists every broken rule. */
export function compilePolicy(policy: RateLimitPolicy): CompileResult {
  const problems: string[] = [];
  const spec = policy.spec;
  for (const plan of spec.plans ?? []) {
    if (!PLAN_NAME.test(plan.name)) {
      problems.push(`plans: name "${plan.name}" must be lowercase letters, digits, '.', '_' or '-'`);
    }
  }
  const ban = banOf(policy, problems);
  const candidate = {
    domain: policyDomain(policy),
    uid: policy.metadata.uid ?? '',
    generation: policy.metadata.generation ?? 1,
    plans: (spec.plans ?? []).map((p) => ({
      name: p.name,
      requestsPerMinute: p.requestsPerMinute,
      requestsPerDay: p.requestsPerDay,
    })),
    defaultPlan: spec.defaultPlan,
    overrides: (spec.overrides ?? []).map((o) => ({
      keyId: o.keyId,
      requestsPerMinute: o.requestsPerMinute,
      requestsPerDay: o.requestsPerDay,
    })),
    ...(ban === undefined ? {} : { ban }),
  };
  const checked = compiledPolicySchema.safeParse(candidate);
  if (!checked.success) {
    for (const issue of checked.error.issues) problems.push(`${issue.path.join('.')}: ${issue.message}`);
  }
  if (problems.length > 0 || !checked.success) return { ok: false, message: problems.join('; ') };
  return { ok: true, entry: checked.data };
}

/** The entries of the config now in the ConfigMap, by domain (empty when it is missing or unreadable). */
export function currentEntries(text: string | undefined): Map<string, CompiledPolicy> {
  if (text === undefined) return new Map();
  try {
    return new Map(parseCompiledConfig(text).policies.map((p) => [p.domain, p]));
  } catch {
    return new Map();
  }
}

/**
 * The config document for `policies`: each accepted policy's new entry, and for each policy that is
 * not accepted the entry already enforced for it (same uid), if any. Deleted policies drop out.
 */
export function compileConfig(
  policies: readonly RateLimitPolicy[],
  current: ReadonlyMap<string, CompiledPolicy>,
): string {
  const entries: CompiledPolicy[] = [];
  for (const policy of policies) {
    const result = compilePolicy(policy);
    if (result.ok) {
      entries.push(result.entry);
      continue;
    }
    const kept = current.get(policyDomain(policy));
    if (kept !== undefined && kept.uid === (policy.metadata.uid ?? '')) entries.push(kept);
  }
  return renderCompiledConfig(entries);
}
