/**
 * Compilation of RateLimitPolicies into the rate-limit service's config (docs/ratelimits.md, "The
 * compiled config"), the desired-state step of the controller: pure, unit-tested, no I/O.
 *
 * A policy compiles into one entry of `config.json` (`CompiledPolicy`, the schema shared with the
 * server). The checks are the CRD's, run again here with the same messages, because a CRD rule does not
 * re-check objects stored before it existed (and Helm does not upgrade CRDs); and one the CRD cannot
 * make: the compiled entry is at most MAX_POLICY_CONFIG_BYTES, so one policy always fits in a config
 * ConfigMap (`shards.ts`). A policy that fails them is not Accepted; the service keeps enforcing the
 * entry already in the config for it, if any, so a bad edit never lifts a limit.
 */
import {
  DEFAULT_MISSING_KEY_ID,
  policyDomain,
  type MissingKeyId,
  type RateLimitPolicy,
} from '../../api/ratelimitpolicy.js';
import {
  compiledPolicySchema,
  MAX_BAN_SECONDS,
  MAX_OVERRIDE_KEY_ID_BYTES,
  MAX_POLICY_CONFIG_BYTES,
  parseCompiledConfig,
  renderCompiledEntry,
  type CompiledPolicy,
} from '../../ratelimit/config-schema.js';
import type { CurrentShard } from './shards.js';
import { parseDurationSeconds } from './duration.js';

const PLAN_NAME = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

export type CompileResult =
  | {
      readonly ok: true;
      readonly entry: CompiledPolicy;
      /** The entry as written into the config (`renderCompiledEntry`). */
      readonly text: string;
    }
  | { readonly ok: false; readonly message: string };

function sizeProblem(text: string): string | undefined {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= MAX_POLICY_CONFIG_BYTES) return undefined;
  return (
    `the compiled policy is ${bytes} bytes; one policy may take at most ${MAX_POLICY_CONFIG_BYTES} bytes ` +
    `(512 KiB) of the rate-limit config: use fewer or shorter override keyIds (JSON writes a quote, a ` +
    `backslash or a control character in 2 to 6 bytes)`
  );
}

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

/** The CRD's rule on the bytes of the override key ids, with its message. */
function keyIdBytesProblem(policy: RateLimitPolicy, problems: string[]): void {
  const bytes = (policy.spec.overrides ?? []).reduce((sum, o) => sum + Buffer.byteLength(o.keyId, 'utf8'), 0);
  if (bytes <= MAX_OVERRIDE_KEY_ID_BYTES) return;
  problems.push(
    `overrides: the override keyIds take more than ${MAX_OVERRIDE_KEY_ID_BYTES} bytes (384 KiB) of UTF-8 ` +
      'together, and one policy may take at most 512 KiB of the rate-limit config: use fewer or shorter ' +
      'keyIds (a character outside ASCII takes 2 to 4 bytes)',
  );
}

/**
 * `missingKeyId` as compiled: left out at the default (`LimitByRemoteAddress`), so the config of a
 * policy that does not set it is the same bytes as before the field existed.
 */
function missingKeyIdOf(policy: RateLimitPolicy): { missingKeyId?: MissingKeyId } {
  const value = policy.spec.missingKeyId;
  return value === undefined || value === DEFAULT_MISSING_KEY_ID ? {} : { missingKeyId: value };
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
  keyIdBytesProblem(policy, problems);
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
    ...missingKeyIdOf(policy),
  };
  const checked = compiledPolicySchema.safeParse(candidate);
  if (!checked.success) {
    for (const issue of checked.error.issues) problems.push(`${issue.path.join('.')}: ${issue.message}`);
  }
  if (problems.length > 0 || !checked.success) return { ok: false, message: problems.join('; ') };
  const text = renderCompiledEntry(checked.data);
  const tooBig = sizeProblem(text);
  if (tooBig !== undefined) return { ok: false, message: tooBig };
  return { ok: true, entry: checked.data, text };
}

/**
 * Reads one config shard's `config.json` as the operator wrote it: each entry's text by domain
 * (`renderCompiledEntry` of the valid ones, '' for an entry the schema refuses), and the valid entries.
 * A document that does not parse has no entries.
 */
export function readShard(
  name: string,
  text: string | undefined,
): { shard: CurrentShard; valid: CompiledPolicy[] } {
  const entries = new Map<string, string>();
  let parsed: ReturnType<typeof parseCompiledConfig> = { policies: [], rejected: [] };
  try {
    if (text !== undefined) parsed = parseCompiledConfig(text);
  } catch {
    // refused whole: nothing in it counts; its policies are placed again
  }
  for (const r of parsed.rejected) if (r.domain !== '') entries.set(r.domain, '');
  for (const p of parsed.policies) entries.set(p.domain, renderCompiledEntry(p));
  return { shard: { name, text, entries }, valid: parsed.policies };
}

/**
 * The entry text of every policy that should be enforced, by domain: each accepted policy's new
 * entry, and for each policy that is not accepted the entry already enforced for it (same uid) in
 * `current`, if any. Deleted policies drop out.
 */
export function desiredEntries(
  policies: readonly RateLimitPolicy[],
  current: ReadonlyMap<string, CompiledPolicy>,
): Map<string, string> {
  const desired = new Map<string, string>();
  for (const policy of policies) {
    const domain = policyDomain(policy);
    const result = compilePolicy(policy);
    if (result.ok) {
      desired.set(domain, result.text);
      continue;
    }
    const kept = current.get(domain);
    if (kept !== undefined && kept.uid === (policy.metadata.uid ?? ''))
      desired.set(domain, renderCompiledEntry(kept));
  }
  return desired;
}
