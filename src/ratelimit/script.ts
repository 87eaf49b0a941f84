/**
 * The Lua script that checks and counts one check in one Redis round trip, atomically (Redis runs a
 * script to completion before any other command: "Atomicity of scripts", Redis documentation), so
 * parallel callers of one key never get more than the limit admitted.
 *
 * Rules (docs/ratelimits.md, "Rules worth knowing" under "Degraded mode (Redis down)", and
 * "Redis"):
 * - A banned key is refused without touching its counters.
 * - A request is admitted only if it fits both windows; then both counters grow by `hits`. A refused
 *   request is not counted (it used no quota).
 * - A refused request of a policy with a ban adds 1 to the key's rejected counter, which lives until
 *   the refusing window resets; when it passes `afterRejectedRequests`, the key is banned for the
 *   ban's duration and the counter is cleared.
 *
 * - A check Redis runs after its deadline (ARGV 8, Unix ms in Redis's own clock, `TIME`) reads and
 *   writes nothing: its caller has given up on the answer and answered by the failure mode, so it
 *   must not be charged (docs/adr/2026-11-25-ratelimit-script-deadline.md; `redis-clock.ts` for how the
 * deadline
 *   is set).
 *
 * KEYS: 1 minute counter, 2 day counter, 3 ban flag, 4 rejected counter (all one hash tag).
 * ARGV: 1 hits, 2 minute limit, 3 day limit, 4 minute counter TTL (ms), 5 day counter TTL (ms),
 *       6 ban threshold (0: no ban), 7 ban duration (ms), 8 deadline (Unix ms, Redis's clock).
 * Reply: {outcome, minuteUsed, dayUsed, ttlMs} with outcome 0 admitted, 1 limited, 2 limited and now
 *        banned (ttlMs = ban duration), 3 banned (ttlMs = ban time left), 4 too late, nothing done
 *        (ttlMs = milliseconds past the deadline).
 *
 * `TIME` before a write needs script effects replication, the default since Redis 5 (and the only
 * mode since 7).
 */
import type { CounterOutcome } from './decision.js';
import { COUNTER_GRACE_MS } from './windows.js';

export const CHECK_AND_COUNT_LUA = `
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local deadline = tonumber(ARGV[8])
if nowMs > deadline then
  return {4, 0, 0, nowMs - deadline}
end
local banTtl = redis.call('PTTL', KEYS[3])
local minute = tonumber(redis.call('GET', KEYS[1]) or '0')
local day = tonumber(redis.call('GET', KEYS[2]) or '0')
if banTtl > 0 then
  return {3, minute, day, banTtl}
end
local hits = tonumber(ARGV[1])
local minuteOver = minute + hits > tonumber(ARGV[2])
local dayOver = day + hits > tonumber(ARGV[3])
if not minuteOver and not dayOver then
  minute = redis.call('INCRBY', KEYS[1], hits)
  if minute == hits then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
  day = redis.call('INCRBY', KEYS[2], hits)
  if day == hits then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
  return {0, minute, day, 0}
end
local threshold = tonumber(ARGV[6])
if threshold > 0 then
  local rejected = redis.call('INCR', KEYS[4])
  -- Until the refusing window's end: the counters' TTL less their grace.
  local windowTtl = tonumber(dayOver and ARGV[5] or ARGV[4])
  redis.call('PEXPIRE', KEYS[4], math.max(1, windowTtl - ${COUNTER_GRACE_MS}))
  if rejected > threshold then
    redis.call('SET', KEYS[3], '1', 'PX', ARGV[7])
    redis.call('DEL', KEYS[4])
    return {2, minute, day, tonumber(ARGV[7])}
  end
end
return {1, minute, day, 0}
`;

/** The number of KEYS the script takes. */
export const CHECK_AND_COUNT_KEYS = 4;

/** Redis ran the script after its deadline and did nothing. */
export interface TooLate {
  readonly kind: 'tooLate';
  /** Milliseconds past the deadline, by Redis's clock. */
  readonly lateMs: number;
}

/**
 * Reads the script's reply.
 *
 * @throws TypeError when the reply is not four integers (a script of another version answered)
 */
export function parseScriptReply(reply: unknown): CounterOutcome | TooLate {
  if (!Array.isArray(reply) || reply.length !== 4 || !reply.every((n) => typeof n === 'number')) {
    throw new TypeError(`unexpected reply from the rate-limit script: ${JSON.stringify(reply)}`);
  }
  const [outcome, minuteUsed, dayUsed, ttlMs] = reply as [number, number, number, number];
  switch (outcome) {
    case 0:
      return { kind: 'admitted', minuteUsed, dayUsed };
    case 1:
      return { kind: 'limited', minuteUsed, dayUsed };
    case 2:
      return { kind: 'bannedNow', minuteUsed, dayUsed, banTtlMs: ttlMs };
    case 3:
      return { kind: 'banned', minuteUsed, dayUsed, banTtlMs: ttlMs };
    case 4:
      return { kind: 'tooLate', lateMs: ttlMs };
    default:
      throw new TypeError(`unexpected outcome ${outcome} from the rate-limit script`);
  }
}

/**
 * The batch script: adds hits this replica already admitted (batched-counts.ts) to both windows, with
 * the check script's TTL rule (a new counter gets its window's TTL), and reports the counts and the
 * ban. It decides nothing and has no deadline: the hits were admitted, so a late run still counts
 * them (a batch is never sent twice: docs/ratelimits.md, "Checks far below their limit: batched
 * counts").
 *
 * KEYS: 1 minute counter, 2 day counter, 3 ban flag (one hash tag).
 * ARGV: 1 hits, 2 minute counter TTL (ms), 3 day counter TTL (ms).
 * Reply: {minuteUsed, dayUsed, banTtlMs} (banTtlMs <= 0: no ban; PTTL's -2).
 */
export const ADD_BATCH_LUA = `
local hits = tonumber(ARGV[1])
local minute = redis.call('INCRBY', KEYS[1], hits)
if minute == hits then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local day = redis.call('INCRBY', KEYS[2], hits)
if day == hits then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return {minute, day, redis.call('PTTL', KEYS[3])}
`;

/** The number of KEYS the batch script takes. */
export const ADD_BATCH_KEYS = 3;

/**
 * Reads the batch script's reply.
 *
 * @throws TypeError when the reply is not three integers
 */
export function parseBatchReply(reply: unknown): { minuteUsed: number; dayUsed: number; banTtlMs: number } {
  if (!Array.isArray(reply) || reply.length !== 3 || !reply.every((n) => typeof n === 'number')) {
    throw new TypeError(`unexpected reply from the batch script: ${JSON.stringify(reply)}`);
  }
  const [minuteUsed, dayUsed, banTtlMs] = reply as [number, number, number];
  return { minuteUsed, dayUsed, banTtlMs };
}
