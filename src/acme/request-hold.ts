/**
 * Holds requests to the ACME CA while the operator's memory is held (the memory reducer's
 * `MemoryHold`, src/controller/memory-reducer.ts): in the burst after a CA outage each order's
 * requests, answers and certificate parsing were most of what the operator allocated, and its
 * resident set grew faster than collections could follow (docs/performance.md, tenth and eleventh
 * rounds). A held request waits, then is sent as it was; it is not cancelled or failed by the hold,
 * which lasts about two seconds at most. Its deadline (request-timeout.ts) runs while it waits.
 */
import type { AdapterRequestConfig, RequestAdapter } from './request-timeout.js';

/**
 * An adapter that asks `relief` before each request and, when given a promise, waits for it before
 * handing the request to `send`.
 *
 * @param send the adapter that sends the request (placed beneath the nonce pool, so nonces the pool
 *   answers are not held, and above the request metrics, so their durations leave the wait out)
 * @param relief undefined while requests may go; otherwise a promise that resolves when they may
 *   (`MemoryHold.relief`)
 */
export function holdRequests(send: RequestAdapter, relief: () => Promise<void> | undefined): RequestAdapter {
  return async (config: AdapterRequestConfig): Promise<unknown> => {
    const held = relief();
    if (held) await held;
    return send(config);
  };
}
