/**
 * How far Redis's clock is from this process's, so that a check can tell Redis, in Redis's own
 * clock, the instant after which its answer is no longer wanted (docs/ratelimits.md, "Redis";
 * docs/adr/2026-11-25-ratelimit-script-deadline.md; `script.ts`, ARGV[8]).
 *
 * Why: a paused Redis (SIGSTOP, `CLIENT PAUSE`, `DEBUG SLEEP`, a long fork) keeps the TCP connection.
 * A command written to it waits in Redis's socket while the check times out and is answered by the
 * failure mode; when Redis resumes it runs the command. Only Redis can tell that it is late, and only
 * by its own clock (`TIME`), so the deadline must be given in that clock.
 *
 * The two clocks are never assumed to agree (the service and Redis run on different hosts; with NTP
 * they differ by milliseconds, without it by anything). Instead the offset is measured the way
 * client-go's leader election judges a Lease (k8s.io/client-go/tools/leaderelection,
 * `observedTime`; src/kube/leader-election.ts): by what was observed on the local clock. One `TIME`
 * round trip, sent at local `sentMs` and answered at local `receivedMs` with Redis time `redisMs`,
 * bounds the offset (Redis minus local):
 *
 *     redisMs - receivedMs  <=  offset  <=  redisMs - sentMs
 *
 * The deadline sent to Redis uses the lower bound, so it is never later than the true deadline: a
 * command Redis runs after it is never counted. What that costs: the deadline is early by the time
 * the `TIME` reply took to be read (usually well under a millisecond; a garbage-collection pause
 * during the measurement takes its length from the budget until the next measurement).
 *
 * Local times are monotonic (`performance.now()`), so a step of this host's wall clock changes
 * nothing. A step of Redis's clock is seen at the next measurement: backwards, the commands sent
 * meanwhile get that much more time in Redis; forwards, they are refused as late (answered by the
 * failure mode) until then; the store measures again at once when Redis says a check came late.
 *
 * A Redis Cluster has one clock per node and the service does not know which node will run a
 * command, so the estimate is the lowest over the nodes: right for the node with the slowest clock,
 * early for the others by how much their clocks run ahead of it.
 *
 * Pure: the times are parameters.
 */

/** One `TIME` round trip to one node. */
export interface ClockSample {
  /** Local monotonic ms when `TIME` was sent. */
  readonly sentMs: number;
  /** Local monotonic ms when its reply was read. */
  readonly receivedMs: number;
  /** Redis's time in its reply, Unix ms. */
  readonly redisMs: number;
}

/** The offset of Redis's clock (Unix ms) from the local monotonic clock, from `TIME` round trips. */
export class RedisClockOffset {
  #lowerBoundMs: number | undefined;

  /**
   * Redis Unix ms minus local monotonic ms, at most the true offset of every node measured; undefined
   * before the first measurement.
   */
  get lowerBoundMs(): number | undefined {
    return this.#lowerBoundMs;
  }

  /**
   * Takes one round of measurements, one entry per node (undefined: the node did not answer).
   *
   * When every node answered, the estimate becomes the lowest of this round. When some did not, the
   * estimate can only go down (a node that did not answer keeps its earlier share in it). When none
   * answered, the estimate is unchanged.
   */
  update(round: readonly (ClockSample | undefined)[]): void {
    const answered = round.filter((s): s is ClockSample => s !== undefined);
    if (answered.length === 0) return;
    const lowest = Math.min(...answered.map((s) => s.redisMs - s.receivedMs));
    const complete = answered.length === round.length;
    this.#lowerBoundMs =
      complete || this.#lowerBoundMs === undefined ? lowest : Math.min(this.#lowerBoundMs, lowest);
  }

  /**
   * The Unix ms, in Redis's clock, that corresponds to local monotonic `localMs` or comes before it,
   * rounded down; undefined before the first measurement.
   */
  toRedisMs(localMs: number): number | undefined {
    return this.#lowerBoundMs === undefined ? undefined : Math.floor(localMs + this.#lowerBoundMs);
  }
}

/**
 * Redis's `TIME` reply (`[unix seconds, microseconds]`, as strings) in Unix ms, rounded down.
 *
 * @throws TypeError when the reply is not two integers
 */
export function parseRedisTime(reply: unknown): number {
  if (!Array.isArray(reply) || reply.length !== 2) {
    throw new TypeError(`unexpected reply to TIME: ${JSON.stringify(reply)}`);
  }
  const [seconds, micros] = reply.map(Number) as [number, number];
  if (!Number.isInteger(seconds) || !Number.isInteger(micros)) {
    throw new TypeError(`unexpected reply to TIME: ${JSON.stringify(reply)}`);
  }
  return seconds * 1000 + Math.floor(micros / 1000);
}

/**
 * Milliseconds of a check's Redis command timeout during which Redis may still run its script: the
 * rest is left for the reply to travel back and be read before the command times out, so that a
 * script that counted is, but for a stall on the way back, answered by its count rather than by the
 * failure mode. 50 ms, and never more than half the timeout.
 */
export function scriptBudgetMs(commandTimeoutMs: number): number {
  return commandTimeoutMs - Math.min(REPLY_MARGIN_MS, commandTimeoutMs / 2);
}

/** See `scriptBudgetMs`. */
export const REPLY_MARGIN_MS = 50;
