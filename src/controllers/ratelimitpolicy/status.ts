/**
 * The status a RateLimitPolicy should have: `Accepted` from the compilation, `Enforced` from the
 * servers' load reports, `Attached` from its targets (attachment.ts), `observedGeneration` and the domain the gateway sends. Pure.
 */
import type { Condition } from '../../api/customdomain.js';
import { policyDomain, type RateLimitPolicy, type RateLimitPolicyStatus } from '../../api/ratelimitpolicy.js';
import { setCondition, type ConditionInput } from '../../kube/conditions.js';
import type { LoadReport } from '../../ratelimit/load-report.js';
import type { CompileResult } from './compile.js';
import { enforcedVerdict } from './enforced.js';

export interface StatusInput {
  readonly policy: RateLimitPolicy;
  readonly compiled: CompileResult;
  readonly reports: readonly LoadReport[];
  readonly now: Date;
  /**
   * When to judge which reports are live, Unix ms (default `now`): the controller's last look
   * (report-liveness.ts), so a verdict changes with liveness only when every policy is queued.
   */
  readonly reportsJudgedAtMs?: number;
  /**
   * `namespace/name` of the config ConfigMap that holds this generation of the policy; absent while
   * no shard has it yet.
   */
  readonly configConfigMap?: string;
  /** Name of the config shard that holds or will hold the policy, if known. */
  readonly shard?: string;
  /** Why the shard meant for this policy could not be written (the API server's answer), if it failed. */
  readonly configWriteError?: string;
  /** `namespace/name` of the status ConfigMap, for messages. */
  readonly statusConfigMap: string;
  /**
   * The `Attached` condition (attachment.ts `attachedCondition`); undefined when the policy has no
   * targets, which removes the condition.
   */
  readonly attached?: ConditionInput | undefined;
}

/** Where the compiled policy is: only a ConfigMap that holds this generation is named. */
function acceptedMessage(input: StatusInput, domain: string): string {
  if (input.configConfigMap !== undefined) {
    return `compiled into ConfigMap ${input.configConfigMap} as rate-limit domain ${domain}`;
  }
  const failed =
    input.configWriteError === undefined ? '' : `; writing failed, retrying: ${input.configWriteError}`;
  return `compiled as rate-limit domain ${domain}; not yet written into a rate-limit config ConfigMap${failed}`;
}

/** The desired status. */
export function desiredStatus(input: StatusInput): RateLimitPolicyStatus {
  const { policy, compiled, now } = input;
  const generation = policy.metadata.generation ?? 1;
  const domain = policyDomain(policy);
  let conditions: Condition[] = policy.status?.conditions ?? [];
  conditions = setCondition(
    conditions,
    compiled.ok
      ? { type: 'Accepted', status: 'True', reason: 'Compiled', message: acceptedMessage(input, domain) }
      : { type: 'Accepted', status: 'False', reason: 'InvalidSpec', message: compiled.message },
    generation,
    now,
  );
  const verdict = enforcedVerdict({
    domain,
    uid: policy.metadata.uid ?? '',
    generation,
    accepted: compiled.ok,
    reports: input.reports,
    ...(input.shard === undefined ? {} : { shard: input.shard }),
    nowMs: input.reportsJudgedAtMs ?? now.getTime(),
    statusConfigMap: input.statusConfigMap,
  });
  conditions = setCondition(
    conditions,
    { type: 'Enforced', status: verdict.status, reason: verdict.reason, message: verdict.message },
    generation,
    now,
  );
  conditions =
    input.attached === undefined
      ? conditions.filter((c) => c.type !== 'Attached')
      : setCondition(conditions, input.attached, generation, now);
  return { observedGeneration: generation, domain, conditions };
}
