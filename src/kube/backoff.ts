/**
 * Exponential backoff with "equal jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"),
 * the delay rule shared by the work queue and the informer restarts. Pure: randomness is a parameter.
 */
export interface BackoffPolicy {
  /** Delay after the first failure, milliseconds. */
  baseMs: number;
  /** Upper bound of any delay, milliseconds. */
  maxMs: number;
}

/**
 * The delay before retry number `failures` (1 for the first retry): a value in
 * [cap/2, cap] where cap = min(maxMs, baseMs * 2^(failures-1)), so delays grow but never align.
 */
export function backoffDelayMs(
  policy: BackoffPolicy,
  failures: number,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, failures - 1);
  const cap = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(exponent, 30));
  return Math.round(cap / 2 + random() * (cap / 2));
}
