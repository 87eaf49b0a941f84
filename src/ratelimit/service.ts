/**
 * One `ShouldRateLimit` call, from request to response: pick the policy by `domain` (or, when the
 * request has the gateway domain, by each descriptor's `portico.dev/policy` entry: `gateway-domain.ts`), the limits of
 * each descriptor (`limits.ts`), check and count in Redis (`CounterStore`), and answer with the code,
 * one DescriptorStatus per descriptor and the headers (`decision.ts`).
 *
 * `hits_addend` is honoured: 0 or unset counts 1 (rls.proto). When Redis cannot answer, each limited
 * descriptor is answered by the failure mode:
 * - `allow` (fail open, the default): OK, without rate-limit headers, since the counts are unknown;
 * - `deny` (fail closed): OVER_LIMIT with `Retry-After: 1`, `X-RateLimit-Remaining: 0` and the
 *   minute limit.
 * Either way the failure is counted (`portico_ratelimit_store_failures_total`) and logged at most once
 * every 10 s with the number of failures since the last line. A check answered by the failure mode is
 * never counted later (the store's script refuses to count past its deadline: `redis-store.ts`).
 *
 * A request over the bounds of `request-limits.ts` is refused before anything is looked up or
 * counted: `shouldRateLimit` throws InvalidRequestError (the gRPC layer answers INVALID_ARGUMENT).
 */
import type { Logger } from 'pino';
import {
  decide,
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
import { counterKeys } from './redis-keys.js';
import type { CounterStore } from './redis-store.js';
import { checkRequestLimits, DEFAULT_REQUEST_LIMITS, type RequestLimits } from './request-limits.js';
import { counterTtlMs, currentWindows, secondsUntil } from './windows.js';

export type FailureMode = 'allow' | 'deny';

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
  #failuresSinceLog = 0;
  #lastFailureLogMs = 0;

  constructor(deps: RateLimitServiceDeps) {
    this.#d = deps;
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
    const requestDomain = request.domain ?? '';
    const byDomain = this.#d.policies().byDomain;
    const gatewayDomain = this.#d.gatewayDomain ?? DEFAULT_GATEWAY_DOMAIN;
    const hits = request.hits_addend !== undefined && request.hits_addend > 0 ? request.hits_addend : 1;
    const nowMs = this.#d.now();
    const descriptors = request.descriptors ?? [];
    let response: RateLimitResponse;
    if (descriptors.length === 1) {
      // The common case (one descriptor per API request): no Promise.all, no intermediate arrays.
      const entries = descriptors[0]?.entries ?? [];
      const domain = descriptorDomain(requestDomain, entries, gatewayDomain);
      const answer = await this.#answer(domain, lookupLimits(byDomain.get(domain), entries), hits, nowMs);
      response = {
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
      response = {
        overall_code: answers.some((a) => a.status.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK',
        statuses: answers.map((a) => a.status),
        response_headers_to_add: headline ? rateLimitHeaders(headline) : [],
      };
    }
    this.#d.metrics.checkDuration.observe((performance.now() - startedMs) / 1000);
    return response;
  }

  async #answer(domain: string, lookup: LimitLookup, hits: number, nowMs: number): Promise<DescriptorAnswer> {
    if (lookup.kind !== 'limited') {
      const reason = lookup.kind === 'unknownDomain' ? 'unknown_domain' : 'no_key_id';
      this.#d.metrics.checksTotal.inc({
        domain: lookup.kind === 'unknownDomain' ? '' : domain,
        code: 'OK',
        reason,
      });
      return { status: { code: 'OK' } };
    }
    let outcome: CounterOutcome;
    try {
      outcome = await this.#count(domain, lookup, hits, nowMs);
    } catch (err: unknown) {
      if (!isRateLimitError(err)) throw err;
      return this.#failureAnswer(domain, lookup, nowMs, err);
    }
    const decision = decide(lookup.limits, outcome, hits, nowMs);
    this.#d.metrics.checksTotal.inc({ domain, code: decision.code, reason: decision.reason });
    if (outcome.kind === 'bannedNow') {
      this.#d.metrics.bansTotal.inc({ domain });
      this.#d.metrics.bans.started(domain, nowMs, outcome.banTtlMs);
      this.#d.log.info(
        {
          domain,
          keyId: keyIdForLog(lookup.keyId),
          keyIdLength: lookup.keyId.length,
          banSeconds: Math.round(outcome.banTtlMs / 1000),
        },
        'key banned: it kept sending while limited',
      );
    }
    return { status: statusOf(decision, nowMs), decision };
  }

  #count(domain: string, lookup: Limited, hits: number, nowMs: number): Promise<CounterOutcome> {
    const windows = currentWindows(nowMs);
    return this.#d.store.checkAndCount(counterKeys(domain, lookup.keyId, windows), {
      hits,
      minuteLimit: lookup.limits.perMinute,
      dayLimit: lookup.limits.perDay,
      minuteTtlMs: counterTtlMs(windows.minute, nowMs),
      dayTtlMs: counterTtlMs(windows.day, nowMs),
      banThreshold: lookup.ban?.afterRejectedRequests ?? 0,
      banDurationMs: lookup.ban?.durationMs ?? 0,
    });
  }

  #failureAnswer(domain: string, lookup: Limited, nowMs: number, err: Error): DescriptorAnswer {
    const mode = this.#d.failureMode;
    this.#d.metrics.storeFailuresTotal.inc({ failure_mode: mode });
    this.#d.metrics.checksTotal.inc({
      domain,
      code: mode === 'allow' ? 'OK' : 'OVER_LIMIT',
      reason: 'store_unavailable',
    });
    this.#logFailure(err, nowMs);
    if (mode === 'allow') return { status: { code: 'OK' } };
    const decision: DescriptorDecision = {
      code: 'OVER_LIMIT',
      reason: 'minute',
      report: { window: 'minute', limit: lookup.limits.perMinute, remaining: 0, resetMs: nowMs + 1000 },
      retryAfterSeconds: 1,
    };
    return { status: statusOf(decision, nowMs), decision };
  }

  #logFailure(err: Error, nowMs: number): void {
    this.#failuresSinceLog += 1;
    if (nowMs - this.#lastFailureLogMs < FAILURE_LOG_INTERVAL_MS) return;
    this.#d.log.error(
      { err: err.message, failureMode: this.#d.failureMode, failures: this.#failuresSinceLog },
      `Redis unavailable: answering checks by failure mode "${this.#d.failureMode}"`,
    );
    this.#failuresSinceLog = 0;
    this.#lastFailureLogMs = nowMs;
  }
}

/** Characters of a key id a log line carries: a key id is whatever the client sent (#10 item 13). */
export const LOG_KEY_ID_CHARS = 128;

/** `keyId` as a log line carries it: at most `LOG_KEY_ID_CHARS` characters, then `…`. */
export function keyIdForLog(keyId: string): string {
  return keyId.length <= LOG_KEY_ID_CHARS ? keyId : `${keyId.slice(0, LOG_KEY_ID_CHARS)}…`;
}
