/**
 * A circuit breaker in front of Redis (docs/ratelimits.md, "Degraded mode (Redis down)", "No wait
 * on a stalled Redis": after a short detection the service answers from local counts at its normal
 * latency, and goes back to Redis when it answers). The states of the classic breaker (Nygard,
 * "Release It!"; Envoy's outlier detection ejects a host the same way):
 *
 * - **closed**: every check goes to Redis;
 * - **open**: after a check Redis did not answer, checks are answered from local counts without
 *   asking Redis, for `openMs`;
 * - **half-open**: then one check at a time goes to Redis (the probe) while the others stay local;
 *   its success closes the breaker, its failure opens it for another `openMs`.
 *
 * Pure: the clock (ms, any monotonic origin) is a parameter.
 */

/** How long the breaker stays open after a failure before it lets one probe through, ms. */
export const DEFAULT_BREAKER_OPEN_MS = 1_000;

export class StoreBreaker {
  readonly #openMs: number;
  /** Undefined while closed; else when the next probe may go, ms. */
  #openUntilMs: number | undefined;
  #probing = false;

  /** @param openMs how long to answer locally after a failure before probing Redis again, ms */
  constructor(openMs = DEFAULT_BREAKER_OPEN_MS) {
    this.#openMs = openMs;
  }

  /** True while checks are answered without Redis (open or half-open). */
  get degraded(): boolean {
    return this.#openUntilMs !== undefined;
  }

  /**
   * Whether this check may ask Redis. In half-open, true for one caller (the probe) until it reports
   * `success` or `failure`.
   */
  tryStore(nowMs: number): boolean {
    if (this.#openUntilMs === undefined) return true;
    if (this.#probing || nowMs < this.#openUntilMs) return false;
    this.#probing = true;
    return true;
  }

  /** Redis answered a check: closed. */
  success(): void {
    this.#openUntilMs = undefined;
    this.#probing = false;
  }

  /** Redis did not answer a check: open for `openMs` from `nowMs`. */
  failure(nowMs: number): void {
    this.#openUntilMs = nowMs + this.#openMs;
    this.#probing = false;
  }
}
