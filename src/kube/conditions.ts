/**
 * metav1.Condition helpers (Kubernetes API conventions, "Typical status properties").
 * Pure: the clock is a parameter.
 */
import type { Condition } from '../api/customdomain.js';

export interface ConditionInput {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
}

/**
 * Returns a new list with `input` set: `lastTransitionTime` is kept when the status did not flip,
 * `observedGeneration` is always `generation`. Other conditions are kept as they are, in order.
 */
export function setCondition(
  conditions: readonly Condition[],
  input: ConditionInput,
  generation: number,
  now: Date,
): Condition[] {
  const previous = conditions.find((c) => c.type === input.type);
  const next: Condition = {
    ...input,
    observedGeneration: generation,
    lastTransitionTime:
      previous && previous.status === input.status ? previous.lastTransitionTime : now.toISOString(),
  };
  if (!previous) return [...conditions, next];
  return conditions.map((c) => (c.type === input.type ? next : c));
}

/** The condition of `type`, or undefined. */
export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** True when the condition of `type` has status True. */
export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

/**
 * The conditions of `after` that are new or changed status or reason since `before`: the
 * transitions worth an Event. A changed message alone is not a transition.
 */
export function changedConditions(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
): Condition[] {
  return after.filter((c) => {
    const old = findCondition(before, c.type);
    return !old || old.status !== c.status || old.reason !== c.reason;
  });
}

/**
 * What a status write does to the conditions, for its log line: each condition of `after` that is
 * new or whose status, reason or message differs from `before`'s, as `<type>=<status>/<reason>`
 * with ` (message)` appended when only the message changed, then each condition of `before` that
 * `after` lacks, as `-<type>`. Empty when the conditions are equal in those three fields. Pure.
 */
export function conditionChanges(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
): string[] {
  const changes: string[] = [];
  for (const c of after) {
    const old = findCondition(before, c.type);
    if (old && old.status === c.status && old.reason === c.reason && old.message === c.message) continue;
    const messageOnly = old !== undefined && old.status === c.status && old.reason === c.reason;
    changes.push(`${c.type}=${c.status}/${c.reason}${messageOnly ? ' (message)' : ''}`);
  }
  for (const c of before ?? []) if (!findCondition(after, c.type)) changes.push(`-${c.type}`);
  return changes;
}
