/**
 * One `ShouldRateLimit` call, from request to response: pick the policy by `domain` (or, when the
 * request has the gateway domain, by each descriptor's `portico.dev/policy` entry: `gateway-domain.ts`), the limits of
 * each descriptor (`limits.ts`), check and count in Redis (`CounterStore`), and answer with the code,
 * one DescriptorStatus per descriptor and the headers (`decision.ts`).
 *
 * `hits_addend` is honoured: 0 or unset counts 1 (rls.proto). Every answer to a limited descriptor
 * carries the rate-limit headers (docs/ratelimits.md: every answer carries them). When Redis cannot
 * answer, each limited descriptor is answered by the failure mode (docs/ratelimits.md, "Degraded
 * mode (Redis down)"):
 * - `local` (the default): decided on this replica's own counts (`local-counts.ts`: the same windows,
 *   limits and ban as the Redis script), with the headers of that decision;
 * - `allow` (fail open): the same local counts give the headers, but the answer is always OK (no
 *   `Retry-After`);
 * - `deny` (fail closed): OVER_LIMIT with `Retry-After: 1`, `X-RateLimit-Remaining: 0` and the
 *   minute limit.
 * Each such check is counted (`portico_ratelimit_store_failures_total{failure_mode}`,
 * `portico_ratelimit_degraded_checks_total{reason}`) and logged at most once every 10 s with the
 * number since the last line. A check answered by the failure mode is never counted in Redis later
 * (the store's script refuses to count past its deadline: `redis-store.ts`), and local counts are
 * never replayed into Redis. After a check Redis did not answer, the next checks are answered locally
 * at once, without waiting for Redis, and one check at a time probes Redis until it answers again
 * (`store-breaker.ts`).
 *
 * A descriptor without `key_id` is answered by its policy's `missingKeyId` rule (`limits.ts`); a
 * domain no policy names is answered OK without headers (no limit is configured for it), counted
 * with `reason="unknown_domain"` and logged at most once every 10 s with the domain.
 *
 * A request over the bounds of `request-limits.ts` is refused before anything is looked up or
 * counted: `shouldRateLimit` throws InvalidRequestError (the gRPC layer answers INVALID_ARGUMENT).
 */
import type { Logger } from 'pino';
import {
  decide,
  HEADER_RETRY_AFTER,
  headlineDecision,
  rateLimitHeaders,
  type CounterOutcome,
  type DescriptorDecision,
} from './decision.js';
import { DEFAULT_GATEWAY_DOMAIN } from '../api/ratelimitpolicy.js';
import { isInvalidRequestError, isRateLimitError } from './errors.js';
import { descriptorDomain } from './gateway-domain.js';
import { lookupLimits, type LimitLookup } from './limits.js';
import type { CheckMetrics } from './metrics.js';
import type { PolicySnapshot } from './policy-set.js';
import type { DescriptorStatus, RateLimitRequest, RateLimitResponse } from './protocol.js';
import { LocalCounterStore } from './local-counts.js';
import { BatchedCounts, type BatchSettings, type PendingBatch } from './batched-counts.js';
import { OverLimitCache } from './over-limit-cache.js';
import { counterKeys, type CounterKeys } from './redis-keys.js';
import type { CheckArgs, CounterStore } from './redis-store.js';
import { StoreBreaker } from './store-breaker.js';
import { checkRequestLimits, DEFAULT_REQUEST_LIMITS, type RequestLimits } from './request-limits.js';
import { counterTtlMs, currentWindows, secondsUntil, windowEndMs } from './windows.js';

/** What answers a check Redis cannot answer (`--failure-mode`); see the module's docstring. */
export type FailureMode = 'local' | 'allow' | 'deny';
export const FAILURE_MODES: readonly FailureMode[] = ['local', 'allow', 'deny'];

export interface RateLimitServiceDeps {
  /** The snapshot of loaded policies (read once per call). */
  readonly policies: () => PolicySnapshot;
  readonly store: CounterStore;
  readonly failureMode: FailureMode;
  /** Unix time, milliseconds. */
  readonly now: () => number;
  readonly metrics: CheckMetrics;
  readonly log: Logger;
  /** What one request may carry; `DEFAULT_REQUEST_LIMITS` when unset. */
  readonly requestLimits?: RequestLimits;
  /**
   * The one domain a gateway sends for every policy (`--gateway-domain`; Contour's
   * `rateLimitService.domain`): a request with it names the policy in each descriptor's first entry
   * (`gateway-domain.ts`). `DEFAULT_GATEWAY_DOMAIN` when unset.
   */
  readonly gatewayDomain?: string;
  /** The counts of checks Redis cannot answer; a new LocalCounterStore on `now` when unset. */
  readonly localStore?: LocalCounterStore;
  /** How long checks skip Redis after it failed to answer one, ms (`store-breaker.ts`). */
  readonly breakerOpenMs?: number;
  /** A monotonic clock for the breaker, ms; `performance.now()` when unset. */
  readonly monotonicNow?: () => number;
  /**
   * Shadow mode (`--shadow-mode`): decide and count as ever, but answer OK (without `Retry-After`);
   * `portico_ratelimit_shadow_refusals_total` counts what would have been refused.
   */
  readonly shadowMode?: boolean;
  /** Keys over their limit or banned, answered from memory; a new OverLimitCache when unset. */
  readonly overLimitCache?: OverLimitCache;
  /**
   * Checks far below their limit admitted without waiting for Redis, their hits sent in batches
   * (`batched-counts.ts`); unset, `maxBatchHits` 0, or a store without `addBatch`: every check is
   * exact.
   */
  readonly batching?: BatchSettings;
}

const FAILURE_LOG_INTERVAL_MS = 10_000;

type Limited = Extract<LimitLookup, { kind: 'limited' }>;

interface DescriptorAnswer {
  readonly status: DescriptorStatus;
  readonly decision?: DescriptorDecision;
}

function statusOf(decision: DescriptorDecision, nowMs: number): DescriptorStatus {
  return {
    code: decision.code,
    current_limit: {
      requests_per_unit: decision.report.limit,
      unit: decision.report.window === 'minute' ? 'MINUTE' : 'DAY',
    },
    limit_remaining: decision.report.remaining,
    duration_until_reset: { seconds: secondsUntil(decision.report.resetMs, nowMs) },
  };
}

export class RateLimitService {
  readonly #d: RateLimitServiceDeps;
  readonly #local: LocalCounterStore;
  /**
   * One breaker per shard of the store (`CounterStore.shardOf`): one for a single Redis, one per
   * primary of a Redis Cluster. Entries are few (the primaries), never removed.
   */
  readonly #breakers = new Map<string, StoreBreaker>();
  /** Breakers open now; the `degraded` gauge is 1 while any is. */
  #openBreakers = 0;
  readonly #monotonicNow: () => number;
  readonly #overLimit: OverLimitCache;
  readonly #failureLog = new RateLimitedLog();
  readonly #unknownDomainLog = new RateLimitedLog();
  readonly #batched: BatchedCounts | undefined;
  #flushTimer: NodeJS.Timeout | undefined;
  /** Batches sent and not answered yet (awaited by `flush`). */
  readonly #batchesInFlight = new Set<Promise<void>>();

  constructor(deps: RateLimitServiceDeps) {
    this.#d = deps;
    this.#batched =
      deps.batching !== undefined && deps.batching.maxBatchHits > 0 && deps.store.addBatch !== undefined
        ? new BatchedCounts(deps.batching)
        : undefined;
    this.#local = deps.localStore ?? new LocalCounterStore(deps.now);
    this.#monotonicNow = deps.monotonicNow ?? (() => performance.now());
    this.#overLimit = deps.overLimitCache ?? new OverLimitCache();
    // At 0 from the start, so that `increase()` sees the first failure (metrics.ts).
    deps.metrics.storeFailuresTotal.inc({ failure_mode: deps.failureMode }, 0);
  }

  /**
   * Answers one check. Never throws for Redis failures (the failure mode answers).
   *
   * @throws InvalidRequestError when the request is over a bound of `request-limits.ts` (nothing was
   *   looked up or counted)
   */
  async shouldRateLimit(request: RateLimitRequest): Promise<RateLimitResponse> {
    const startedMs = performance.now();
    try {
      checkRequestLimits(request, this.#d.requestLimits ?? DEFAULT_REQUEST_LIMITS);
    } catch (err: unknown) {
      if (isInvalidRequestError(err)) this.#d.metrics.invalidRequestsTotal.inc({ bound: err.bound });
      throw err;
    }
    let response = await this.#respond(request);
    if (this.#d.shadowMode === true && response.overall_code === 'OVER_LIMIT') response = shadowed(response);
    this.#d.metrics.checkDuration.observe((performance.now() - startedMs) / 1000);
    return response;
  }

  /** The answer to a request within the bounds: each descriptor's status and the headline's headers. */
  async #respond(request: RateLimitRequest): Promise<RateLimitResponse> {
    const requestDomain = request.domain ?? '';
    const byDomain = this.#d.policies().byDomain;
    const gatewayDomain = this.#d.gatewayDomain ?? DEFAULT_GATEWAY_DOMAIN;
    const hits = request.hits_addend !== undefined && request.hits_addend > 0 ? request.hits_addend : 1;
    const nowMs = this.#d.now();
    const descriptors = request.descriptors ?? [];
    if (descriptors.length === 1) {
      // The common case (one descriptor per API request): no Promise.all, no intermediate arrays.
      const entries = descriptors[0]?.entries ?? [];
      const domain = descriptorDomain(requestDomain, entries, gatewayDomain);
      const answer = await this.#answer(domain, lookupLimits(byDomain.get(domain), entries), hits, nowMs);
      return {
        overall_code: answer.status.code,
        statuses: [answer.status],
        response_headers_to_add: answer.decision ? rateLimitHeaders(answer.decision) : [],
      };
    } else {
      const answers = await Promise.all(
        descriptors.map((descriptor) => {
          const entries = descriptor.entries ?? [];
          const domain = descriptorDomain(requestDomain, entries, gatewayDomain);
          return this.#answer(domain, lookupLimits(byDomain.get(domain), entries), hits, nowMs);
        }),
      );
      const headline = headlineDecision(answers.flatMap((a) => (a.decision ? [a.decision] : [])));
      return {
        overall_code: answers.some((a) => a.status.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK',
        statuses: answers.map((a) => a.status),
        response_headers_to_add: headline ? rateLimitHeaders(headline) : [],
      };
    }
  }

  async #answer(domain: string, lookup: LimitLookup, hits: number, nowMs: number): Promise<DescriptorAnswer> {
    if (lookup.kind === 'unknownDomain') {
      this.#d.metrics.checksTotal.inc({ domain: '', code: 'OK', reason: 'unknown_domain' });
      this.#unknownDomainLog.note(nowMs, (count) => {
        this.#d.log.warn(
          { domain: domain.slice(0, LOG_KEY_ID_CHARS), checks: count },
          'checks for a domain no loaded policy names are answered OK without limits: is the policy applied and Enforced, and does the gateway send its domain?',
        );
      });
      return { status: { code: 'OK' } };
    }
    if (lookup.kind === 'noKeyId') {
      const decision = refusalWithoutKeyId(nowMs);
      this.#d.metrics.checksTotal.inc({ domain, code: 'OVER_LIMIT', reason: 'no_key_id' });
      if (this.#d.shadowMode === true)
        this.#d.metrics.shadowRefusalsTotal.inc({ domain, reason: 'no_key_id' });
      return { status: statusOf(decision, nowMs), decision };
    }
    return this.#counted(domain, lookup, hits, nowMs);
  }

  /**
   * A limited descriptor: from the over-limit cache, admitted locally far below its limit
   * (`batched-counts.ts`), decided by the store, or by the failure mode.
   */
  async #counted(domain: string, lookup: Limited, hits: number, nowMs: number): Promise<DescriptorAnswer> {
    const windows = currentWindows(nowMs);
    const keys = counterKeys(domain, lookup.keyId, windows, lookup.subject);
    const args = checkArgs(lookup, hits, nowMs);
    const cached = this.#overLimit.get(keys.ban, lookup.limits, nowMs);
    if (cached !== undefined) {
      this.#d.metrics.overLimitCacheHitsTotal.inc();
      return this.#decided(domain, lookup, cached, hits, nowMs);
    }
    let outcome: CounterOutcome;
    const breaker = this.#breakerOf(keys);
    const batched = this.#batched;
    // Not while the store is known to be away (a lost connection, an open breaker): such a check
    // goes to the failure mode.
    const local =
      breaker.degraded || !this.#d.store.connected
        ? undefined
        : batched?.admit(keys, windows, lookup.limits, hits, args, nowMs);
    if (local !== undefined) {
      this.#d.metrics.batchedAdmissionsTotal.inc();
      this.#scheduleFlush();
      return this.#decided(domain, lookup, local, hits, nowMs);
    }
    if (!breaker.tryStore(this.#monotonicNow())) {
      return this.#degradedAnswer(domain, lookup, keys, args, nowMs, undefined);
    }
    // This subject's hits admitted locally and not sent yet go first, so that Redis counts them
    // before it decides this check (one connection: Redis runs commands in the order sent).
    for (const batch of batched?.beginExact(keys, hits) ?? []) this.#sendBatch(batch);
    try {
      outcome = await this.#d.store.checkAndCount(keys, args);
      batched?.exactDone(keys, windows, lookup.limits, hits, outcome, nowMs);
    } catch (err: unknown) {
      batched?.exactFailed(keys, hits);
      if (!isRateLimitError(err)) throw err;
      if (!breaker.degraded) this.#openBreakers += 1;
      breaker.failure(this.#monotonicNow());
      this.#d.metrics.degraded.set(1);
      return this.#degradedAnswer(domain, lookup, keys, args, nowMs, err);
    }
    this.#storeAnswered(breaker);
    this.#overLimit.remember(keys.ban, lookup.limits, outcome, args.banThreshold, nowMs);
    this.#noteBan(domain, lookup, outcome, nowMs);
    return this.#decided(domain, lookup, outcome, hits, nowMs);
  }

  /** The store answered a check: a degraded breaker closes. */
  #storeAnswered(breaker: StoreBreaker): void {
    if (!breaker.degraded) return;
    breaker.success();
    this.#openBreakers -= 1;
    this.#d.metrics.degraded.set(this.#openBreakers > 0 ? 1 : 0);
    this.#d.log.info('Redis answers again: checks are counted in Redis');
  }

  /** Sends the pending batches within `flushIntervalMs` (one timer for all of them). */
  #scheduleFlush(): void {
    if (this.#flushTimer !== undefined || this.#batched === undefined) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      this.#sendPending();
    }, this.#batched.settings.flushIntervalMs);
    this.#flushTimer.unref();
  }

  #sendPending(): void {
    for (const batch of this.#batched?.takePending() ?? []) this.#sendBatch(batch);
  }

  /** Sends one batch; its reply renews the subject's view, its failure drops it (never sent again). */
  #sendBatch(batch: PendingBatch): void {
    const batched = this.#batched;
    const addBatch = this.#d.store.addBatch?.bind(this.#d.store);
    if (batched === undefined || addBatch === undefined) return;
    const sent: Promise<void> = addBatch(batch).then(
      (reply) => {
        batched.acknowledged(batch, reply, this.#d.now());
        this.#d.metrics.batchesTotal.inc({ result: 'acknowledged' });
      },
      () => {
        batched.failed(batch);
        this.#d.metrics.batchesTotal.inc({ result: 'failed' });
      },
    );
    this.#batchesInFlight.add(sent);
    void sent.finally(() => this.#batchesInFlight.delete(sent));
  }

  /**
   * Sends every pending batch now and waits for the answers to all batches in flight (at shutdown,
   * before the store closes). Never throws.
   */
  async flush(): Promise<void> {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    this.#sendPending();
    await Promise.all([...this.#batchesInFlight]);
  }

  /** The breaker of the store's shard that holds `keys`. */
  #breakerOf(keys: CounterKeys): StoreBreaker {
    const shard = this.#d.store.shardOf?.(keys) ?? '';
    let breaker = this.#breakers.get(shard);
    if (breaker === undefined) {
      breaker = new StoreBreaker(this.#d.breakerOpenMs);
      this.#breakers.set(shard, breaker);
    }
    return breaker;
  }

  #decided(
    domain: string,
    lookup: Limited,
    outcome: CounterOutcome,
    hits: number,
    nowMs: number,
  ): DescriptorAnswer {
    const decision = decide(lookup.limits, outcome, hits, nowMs);
    this.#d.metrics.checksTotal.inc({ domain, code: decision.code, reason: decision.reason });
    this.#noteShadow(domain, decision);
    return { status: statusOf(decision, nowMs), decision };
  }

  #noteShadow(domain: string, decision: DescriptorDecision): void {
    if (this.#d.shadowMode === true && decision.code === 'OVER_LIMIT') {
      this.#d.metrics.shadowRefusalsTotal.inc({ domain, reason: decision.reason });
    }
  }

  #noteBan(domain: string, lookup: Limited, outcome: CounterOutcome, nowMs: number): void {
    if (outcome.kind !== 'bannedNow') return;
    this.#d.metrics.bansTotal.inc({ domain });
    this.#d.metrics.bans.started(domain, nowMs, outcome.banTtlMs);
    this.#d.log.info(
      {
        domain,
        keyId: keyIdForLog(lookup.keyId),
        keyIdLength: lookup.keyId.length,
        subject: lookup.subject,
        banSeconds: Math.round(outcome.banTtlMs / 1000),
      },
      'key banned: it kept sending while limited',
    );
  }

  /**
   * A check Redis did not answer (`err`), or that the open breaker kept from Redis (`err` undefined):
   * answered by the failure mode, from this replica's counts for `local` and `allow`.
   */
  #degradedAnswer(
    domain: string,
    lookup: Limited,
    keys: CounterKeys,
    args: CheckArgs,
    nowMs: number,
    err: Error | undefined,
  ): DescriptorAnswer {
    const mode = this.#d.failureMode;
    this.#d.metrics.storeFailuresTotal.inc({ failure_mode: mode });
    this.#failureLog.note(nowMs, (count) => {
      this.#d.log.error(
        {
          err: err?.message ?? 'Redis did not answer the last probe; answering without asking it',
          failureMode: mode,
          failures: count,
        },
        `Redis unavailable: answering checks by failure mode "${mode}"`,
      );
    });
    let decision: DescriptorDecision;
    if (mode === 'deny') {
      decision = {
        code: 'OVER_LIMIT',
        reason: 'minute',
        report: { window: 'minute', limit: lookup.limits.perMinute, remaining: 0, resetMs: nowMs + 1000 },
        retryAfterSeconds: 1,
      };
    } else {
      const outcome = this.#local.checkAndCountNow(keys, args);
      this.#noteBan(domain, lookup, outcome, nowMs);
      const local = decide(lookup.limits, outcome, args.hits, nowMs);
      this.#d.metrics.degradedChecksTotal.inc({ reason: local.reason });
      decision = mode === 'allow' ? admittedAnyway(local) : local;
    }
    this.#d.metrics.checksTotal.inc({ domain, code: decision.code, reason: 'store_unavailable' });
    this.#noteShadow(domain, decision);
    return { status: { ...statusOf(decision, nowMs), ...degradedLimit(decision) }, decision };
  }
}

/**
 * The `current_limit.name` of a status answered without Redis, so that a reader of the gRPC answer
 * (Envoy's logs, a test) can tell it from a counted one; the headers are the same.
 */
export const DEGRADED_STATUS_NAME = 'portico:store_unavailable';

function degradedLimit(decision: DescriptorDecision): Pick<DescriptorStatus, 'current_limit'> {
  return {
    current_limit: {
      requests_per_unit: decision.report.limit,
      unit: decision.report.window === 'minute' ? 'MINUTE' : 'DAY',
      name: DEGRADED_STATUS_NAME,
    },
  };
}

/**
 * Shadow mode: the answer Envoy acts on is OK; the statuses keep each descriptor's real code (as
 * envoyproxy/ratelimit's `SHADOW_MODE` leaves them), the headers stay but `Retry-After`, which only
 * a 429 carries (docs/ratelimits.md, "Shadow mode"; RFC 6585 §4).
 */
function shadowed(response: RateLimitResponse): RateLimitResponse {
  return {
    ...response,
    overall_code: 'OK',
    response_headers_to_add: response.response_headers_to_add.filter((h) => h.key !== HEADER_RETRY_AFTER),
  };
}

/** `allow`: the local decision's headers, but admitted (no Retry-After). */
function admittedAnyway(decision: DescriptorDecision): DescriptorDecision {
  if (decision.code === 'OK') return decision;
  return { code: 'OK', reason: 'admitted', report: decision.report };
}

/**
 * The answer to a descriptor without `key_id` that its policy refuses (`limits.ts`): OVER_LIMIT
 * with `X-RateLimit-Limit: 0` (no request without a key id is admitted), `Remaining: 0`, and
 * `Reset` and `Retry-After` at the end of the current minute (docs/ratelimits.md, "The answer": the
 * headers on every answer and `Retry-After` on every 429; a retry without a key id is refused
 * again).
 */
export function refusalWithoutKeyId(nowMs: number): DescriptorDecision {
  const resetMs = windowEndMs('minute', nowMs);
  return {
    code: 'OVER_LIMIT',
    reason: 'minute',
    report: { window: 'minute', limit: 0, remaining: 0, resetMs },
    retryAfterSeconds: secondsUntil(resetMs, nowMs),
  };
}

function checkArgs(lookup: Limited, hits: number, nowMs: number): CheckArgs {
  const windows = currentWindows(nowMs);
  return {
    hits,
    minuteLimit: lookup.limits.perMinute,
    dayLimit: lookup.limits.perDay,
    minuteTtlMs: counterTtlMs(windows.minute, nowMs),
    dayTtlMs: counterTtlMs(windows.day, nowMs),
    banThreshold: lookup.ban?.afterRejectedRequests ?? 0,
    banDurationMs: lookup.ban?.durationMs ?? 0,
  };
}

/** Logs at most once every FAILURE_LOG_INTERVAL_MS, with the number of events since the last line. */
class RateLimitedLog {
  #since = 0;
  #lastMs = Number.NEGATIVE_INFINITY;

  note(nowMs: number, write: (count: number) => void): void {
    this.#since += 1;
    if (nowMs - this.#lastMs < FAILURE_LOG_INTERVAL_MS) return;
    write(this.#since);
    this.#since = 0;
    this.#lastMs = nowMs;
  }
}

/**
 * Characters of a key id a log line carries: a key id is whatever the client sent, so a log line
 * never carries more of it than this.
 */
export const LOG_KEY_ID_CHARS = 128;

/** `keyId` as a log line carries it: at most `LOG_KEY_ID_CHARS` characters, then `…`. */
export function keyIdForLog(keyId: string): string {
  return keyId.length <= LOG_KEY_ID_CHARS ? keyId : `${keyId.slice(0, LOG_KEY_ID_CHARS)}…`;
}
