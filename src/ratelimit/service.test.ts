import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { CompiledPolicy } from './config-schema.js';
import type { CounterOutcome } from './decision.js';
import { InvalidRequestError, StoreUnavailableError } from './errors.js';
import { indexPolicy } from './limits.js';
import { createRateLimitMetrics } from './metrics.js';
import type { PolicySnapshot } from './policy-set.js';
import type { RateLimitRequest } from './protocol.js';
import type { CounterKeys } from './redis-keys.js';
import { DEFAULT_REQUEST_LIMITS, type RequestLimits } from './request-limits.js';
import type { CheckArgs, CounterStore } from './redis-store.js';
import { DEGRADED_STATUS_NAME, RateLimitService, type FailureMode } from './service.js';

/** 2026-11-22T12:34:10Z: 50 s to the end of the minute. */
const NOW = Date.parse('2026-11-22T12:34:10.000Z');
const MINUTE_END_S = String(Date.parse('2026-11-22T12:35:00.000Z') / 1000);
const DAY_END_S = String(Date.parse('2026-11-23T00:00:00.000Z') / 1000);
const DOMAIN = 'platform-api/public-api';

const policy: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'u1',
  generation: 1,
  plans: [
    { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
    { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
  ],
  defaultPlan: 'free',
  overrides: [],
  ban: { afterRejectedRequests: 2, durationSeconds: 900 },
};
const snapshot: PolicySnapshot = { byDomain: new Map([[DOMAIN, indexPolicy(policy)]]) };

/** A CounterStore in memory with the script's rules (windows, no counting of refusals, the ban). */
class MemoryStore implements CounterStore {
  readonly counts = new Map<string, number>();
  readonly calls: { keys: CounterKeys; args: CheckArgs }[] = [];
  failing = false;
  readonly connected = true;

  checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
    this.calls.push({ keys, args });
    if (this.failing) return Promise.reject(new StoreUnavailableError('Connection is closed.'));
    const get = (k: string): number => this.counts.get(k) ?? 0;
    const minute = get(keys.minute);
    const day = get(keys.day);
    const ban = get(keys.ban);
    if (ban > 0) return Promise.resolve({ kind: 'banned', minuteUsed: minute, dayUsed: day, banTtlMs: ban });
    if (minute + args.hits <= args.minuteLimit && day + args.hits <= args.dayLimit) {
      this.counts.set(keys.minute, minute + args.hits);
      this.counts.set(keys.day, day + args.hits);
      return Promise.resolve({ kind: 'admitted', minuteUsed: minute + args.hits, dayUsed: day + args.hits });
    }
    if (args.banThreshold > 0) {
      const rejected = get(keys.rejected) + 1;
      this.counts.set(keys.rejected, rejected);
      if (rejected > args.banThreshold) {
        this.counts.set(keys.ban, args.banDurationMs);
        this.counts.delete(keys.rejected);
        return Promise.resolve({
          kind: 'bannedNow',
          minuteUsed: minute,
          dayUsed: day,
          banTtlMs: args.banDurationMs,
        });
      }
    }
    return Promise.resolve({ kind: 'limited', minuteUsed: minute, dayUsed: day });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function setup(
  failureMode: FailureMode = 'allow',
  requestLimits?: RequestLimits,
  now = () => NOW,
  extra: { shadowMode?: boolean; policies?: PolicySnapshot } = {},
) {
  const store = new MemoryStore();
  const metrics = createRateLimitMetrics(now);
  const logLines: string[] = [];
  const service = new RateLimitService({
    policies: () => extra.policies ?? snapshot,
    ...(extra.shadowMode === undefined ? {} : { shadowMode: extra.shadowMode }),
    store,
    failureMode,
    now,
    monotonicNow: now,
    metrics,
    ...(requestLimits === undefined ? {} : { requestLimits }),
    log: pino(
      { level: 'info' },
      {
        write: (line: string) => {
          logLines.push(line);
        },
      },
    ),
  });
  return { store, metrics, service, logLines };
}

const check = (keyId: string | undefined, extra: Partial<RateLimitRequest> = {}): RateLimitRequest => ({
  domain: DOMAIN,
  descriptors: [
    {
      entries: [
        ...(keyId === undefined ? [] : [{ key: 'key_id', value: keyId }]),
        { key: 'plan', value: 'free' },
      ],
    },
  ],
  ...extra,
});

const headers = (h: { key: string; value: string }[]): Record<string, string> =>
  Object.fromEntries(h.map((x) => [x.key, x.value]));

async function metricLines(
  metrics: ReturnType<typeof createRateLimitMetrics>,
  name: string,
): Promise<string[]> {
  const text = await metrics.registry.metrics();
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

describe('RateLimitService', () => {
  // A counter series that first appears at 1 has no earlier sample: `increase()` over it reads 0
  // and an alert on the first failure never fires.
  it('starts the failure and refusal counters of every known label value at 0', async () => {
    const { metrics } = setup();
    expect(await metricLines(metrics, 'portico_ratelimit_store_failures_total')).toEqual([
      'portico_ratelimit_store_failures_total{failure_mode="allow"} 0',
    ]);
    expect(await metricLines(metrics, 'portico_ratelimit_invalid_requests_total')).toHaveLength(4);
    const redisErrors = await metricLines(metrics, 'portico_ratelimit_redis_errors_total');
    expect(redisErrors).toHaveLength(12);
    expect(await metricLines(metrics, 'portico_ratelimit_batches_total')).toEqual([
      'portico_ratelimit_batches_total{result="acknowledged"} 0',
      'portico_ratelimit_batches_total{result="failed"} 0',
    ]);
    expect(redisErrors).toContain('portico_ratelimit_redis_errors_total{command="check",error="too_late"} 0');
    expect(await metricLines(metrics, 'portico_ratelimit_config_loads_total')).toEqual([
      'portico_ratelimit_config_loads_total{result="loaded"} 0',
      'portico_ratelimit_config_loads_total{result="rejected"} 0',
    ]);
    expect(await metricLines(metrics, 'portico_ratelimit_load_report_writes_total')).toEqual([
      'portico_ratelimit_load_report_writes_total{result="written"} 0',
      'portico_ratelimit_load_report_writes_total{result="failed"} 0',
    ]);
  });

  it('admits and answers with the window closest to its limit', async () => {
    const { service, store } = setup();
    const r = await service.shouldRateLimit(check('k1'));
    expect(r).toEqual({
      overall_code: 'OK',
      statuses: [
        {
          code: 'OK',
          current_limit: { requests_per_unit: 60, unit: 'MINUTE' },
          limit_remaining: 59,
          duration_until_reset: { seconds: 50 },
        },
      ],
      response_headers_to_add: [
        { key: 'X-RateLimit-Limit', value: '60' },
        { key: 'X-RateLimit-Remaining', value: '59' },
        { key: 'X-RateLimit-Reset', value: MINUTE_END_S },
      ],
    });
    expect(store.calls).toHaveLength(1);
    expect(store.calls[0]?.keys).toEqual({
      minute: `prl:{platform-api%2Fpublic-api|k1}:m:${Math.floor(NOW / 60_000)}`,
      day: `prl:{platform-api%2Fpublic-api|k1}:d:${Math.floor(NOW / 86_400_000)}`,
      rejected: 'prl:{platform-api%2Fpublic-api|k1}:rej',
      ban: 'prl:{platform-api%2Fpublic-api|k1}:ban',
    });
    expect(store.calls[0]?.args).toEqual({
      hits: 1,
      minuteLimit: 60,
      dayLimit: 1000,
      minuteTtlMs: 50_000 + 60_000,
      dayTtlMs: Date.parse('2026-11-23T00:00:00.000Z') - NOW + 60_000,
      banThreshold: 2,
      banDurationMs: 900_000,
    });
  });

  it('counts hits_addend, refuses what does not fit, then bans', async () => {
    const { service, metrics } = setup();
    const admitted = await service.shouldRateLimit(check('k2', { hits_addend: 58 }));
    expect(headers(admitted.response_headers_to_add)['X-RateLimit-Remaining']).toBe('2');
    const refused = await service.shouldRateLimit(check('k2', { hits_addend: 3 }));
    expect(refused.overall_code).toBe('OVER_LIMIT');
    expect(refused.statuses[0]).toEqual({
      code: 'OVER_LIMIT',
      current_limit: { requests_per_unit: 60, unit: 'MINUTE' },
      limit_remaining: 0,
      duration_until_reset: { seconds: 50 },
    });
    expect(headers(refused.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': MINUTE_END_S,
      'Retry-After': '50',
    });
    await service.shouldRateLimit(check('k2', { hits_addend: 3 }));
    const banned = await service.shouldRateLimit(check('k2', { hits_addend: 3 }));
    expect(headers(banned.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(Math.ceil((NOW + 900_000) / 1000)),
      'Retry-After': '900',
    });
    const still = await service.shouldRateLimit(check('k2'));
    expect(still.overall_code).toBe('OVER_LIMIT');
    expect(await metricLines(metrics, 'portico_ratelimit_checks_total')).toEqual(
      expect.arrayContaining([
        `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OK",reason="admitted"} 1`,
        `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="minute"} 2`,
        `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="banned"} 2`,
      ]),
    );
    expect(await metricLines(metrics, 'portico_ratelimit_bans_total')).toEqual([
      `portico_ratelimit_bans_total{domain="${DOMAIN}"} 1`,
    ]);
    expect(await metricLines(metrics, 'portico_ratelimit_bans_active')).toEqual([
      `portico_ratelimit_bans_active{domain="${DOMAIN}"} 1`,
    ]);
  });

  it('reports a ban active until its duration has run out (the 900 s of the test policy)', async () => {
    let nowMs = NOW;
    const { service, metrics } = setup('allow', undefined, () => nowMs);
    for (let i = 0; i < 4; i++) await service.shouldRateLimit(check('k-ends', { hits_addend: 61 }));
    const active = (): Promise<string[]> => metricLines(metrics, 'portico_ratelimit_bans_active');
    expect(await active()).toEqual([`portico_ratelimit_bans_active{domain="${DOMAIN}"} 1`]);
    nowMs = NOW + 899_999;
    expect(await active()).toEqual([`portico_ratelimit_bans_active{domain="${DOMAIN}"} 1`]);
    nowMs = NOW + 900_000;
    expect(await active()).toEqual([]);
  });

  it('logs a ban with at most 128 characters of the key id and its length, whatever the client sent', async () => {
    // The default bound refuses such a key id (request-limits.ts); the log line stays short even if
    // the bound is raised.
    const { service, logLines } = setup('allow', { ...DEFAULT_REQUEST_LIMITS, maxEntryLength: 200_000 });
    const longId = 'k'.repeat(100_000);
    for (let i = 0; i < 4; i++) await service.shouldRateLimit(check(longId, { hits_addend: 61 }));
    const ban = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l['msg'] === 'key banned: it kept sending while limited');
    expect(ban).toMatchObject({ keyId: `${'k'.repeat(128)}…`, keyIdLength: 100_000, banSeconds: 900 });
    expect(Math.max(...logLines.map((l) => l.length))).toBeLessThan(1_000);
  });

  it('answers an unknown domain OK without headers, counted and logged with the domain', async () => {
    const { service, store, metrics, logLines } = setup();
    const unknown = await service.shouldRateLimit({ ...check('k3'), domain: 'nobody/here' });
    expect(unknown).toEqual({ overall_code: 'OK', statuses: [{ code: 'OK' }], response_headers_to_add: [] });
    await service.shouldRateLimit({ ...check('k3'), domain: 'nobody/here' });
    const none = await service.shouldRateLimit({ domain: DOMAIN });
    expect(none).toEqual({ overall_code: 'OK', statuses: [], response_headers_to_add: [] });
    expect(store.calls).toHaveLength(0);
    expect(await metricLines(metrics, 'portico_ratelimit_checks_total')).toEqual([
      'portico_ratelimit_checks_total{domain="",code="OK",reason="unknown_domain"} 2',
    ]);
    // One line for both checks (at most one every 10 s), naming the domain.
    const lines = logLines.filter((l) => l.includes('no loaded policy names'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ domain: 'nobody/here', checks: 1, level: 40 });
  });

  it('refuses a descriptor without key_id nor remote_address, with the headers (Limit 0)', async () => {
    const { service, store, metrics } = setup();
    const noKey = await service.shouldRateLimit(check(undefined));
    expect(noKey.overall_code).toBe('OVER_LIMIT');
    expect(noKey.statuses).toEqual([
      {
        code: 'OVER_LIMIT',
        current_limit: { requests_per_unit: 0, unit: 'MINUTE' },
        limit_remaining: 0,
        duration_until_reset: { seconds: 50 },
      },
    ]);
    expect(headers(noKey.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '0',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': MINUTE_END_S,
      'Retry-After': '50',
    });
    expect(store.calls).toHaveLength(0);
    expect(await metricLines(metrics, 'portico_ratelimit_checks_total')).toEqual([
      `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="no_key_id"} 1`,
    ]);
  });

  it('limits a descriptor without key_id by its remote_address, on counters apart from any key id', async () => {
    const { service, store } = setup();
    const byAddress = (address: string): RateLimitRequest => ({
      domain: DOMAIN,
      descriptors: [{ entries: [{ key: 'remote_address', value: address }] }],
    });
    const first = await service.shouldRateLimit(byAddress('192.0.2.1'));
    expect(first.overall_code).toBe('OK');
    expect(headers(first.response_headers_to_add)).toMatchObject({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '59',
    });
    expect(store.calls[0]?.keys.minute).toMatch(/^prl:\{platform-api%2Fpublic-api\|@192\.0\.2\.1\}:m:/);
    // A key id that reads like the address has counters of its own.
    await service.shouldRateLimit(check('@192.0.2.1'));
    expect(store.calls[1]?.keys.minute).toMatch(/^prl:\{platform-api%2Fpublic-api\|%40192\.0\.2\.1\}:m:/);
    expect(
      headers((await service.shouldRateLimit(byAddress('192.0.2.1'))).response_headers_to_add)[
        'X-RateLimit-Remaining'
      ],
    ).toBe('58');
  });

  it('maps a check with the gateway domain to the policy its descriptors name, sharing its counters', async () => {
    const { service, store, metrics } = setup();
    const gateway = (entries: { key: string; value: string }[]): RateLimitRequest => ({
      domain: 'portico-gateway',
      descriptors: [{ entries }],
    });
    const policyEntry = { key: 'portico.dev/policy', value: DOMAIN };
    // Contour's descriptor with the plan header present, then the one for a missing plan header.
    const withPlan = await service.shouldRateLimit(
      gateway([policyEntry, { key: 'key_id', value: 'k1' }, { key: 'plan', value: 'pro' }]),
    );
    expect(withPlan.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 300, unit: 'MINUTE' },
      limit_remaining: 299,
    });
    const noPlan = await service.shouldRateLimit(
      gateway([policyEntry, { key: 'key_id', value: 'k1' }, { key: 'header_match', value: 'no-plan' }]),
    );
    // The default plan (free, 60/min) and the same counter: the key has used 2.
    expect(noPlan.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 60, unit: 'MINUTE' },
      limit_remaining: 58,
    });
    expect(store.calls.map((c) => c.keys.minute)).toEqual([
      `prl:{platform-api%2Fpublic-api|k1}:m:${Math.floor(NOW / 60_000)}`,
      `prl:{platform-api%2Fpublic-api|k1}:m:${Math.floor(NOW / 60_000)}`,
    ]);
    // Without the policy entry first, or naming no policy: not limited.
    const unnamed = await service.shouldRateLimit(gateway([{ key: 'key_id', value: 'k1' }, policyEntry]));
    expect(unnamed).toEqual({ overall_code: 'OK', statuses: [{ code: 'OK' }], response_headers_to_add: [] });
    const unknown = await service.shouldRateLimit(
      gateway([
        { key: 'portico.dev/policy', value: 'nobody/here' },
        { key: 'key_id', value: 'k1' },
      ]),
    );
    expect(unknown).toEqual({ overall_code: 'OK', statuses: [{ code: 'OK' }], response_headers_to_add: [] });
    expect(store.calls).toHaveLength(2);
    expect(await metricLines(metrics, 'portico_ratelimit_checks_total')).toEqual(
      expect.arrayContaining([
        `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OK",reason="admitted"} 2`,
        'portico_ratelimit_checks_total{domain="",code="OK",reason="unknown_domain"} 2',
      ]),
    );
  });

  it('checks each descriptor of a gateway request against its own policy', async () => {
    const { service, store } = setup();
    const r = await service.shouldRateLimit({
      domain: 'portico-gateway',
      descriptors: [
        {
          entries: [
            { key: 'portico.dev/policy', value: DOMAIN },
            { key: 'key_id', value: 'a' },
          ],
        },
        {
          entries: [
            { key: 'portico.dev/policy', value: 'other/p' },
            { key: 'key_id', value: 'a' },
          ],
        },
      ],
    });
    expect(r.statuses.map((s) => s.code)).toEqual(['OK', 'OK']);
    expect(r.statuses[0]?.current_limit?.requests_per_unit).toBe(60);
    expect(r.statuses[1]).toEqual({ code: 'OK' });
    expect(store.calls).toHaveLength(1);
  });

  it('answers several descriptors in order; the headers describe the refusal', async () => {
    const { service } = setup();
    await service.shouldRateLimit(check('full', { hits_addend: 60 }));
    const r = await service.shouldRateLimit({
      domain: DOMAIN,
      descriptors: [
        { entries: [{ key: 'key_id', value: 'fresh' }] },
        { entries: [{ key: 'other', value: 'x' }] },
        { entries: [{ key: 'key_id', value: 'full' }] },
      ],
    });
    expect(r.overall_code).toBe('OVER_LIMIT');
    // The second has no key_id and no remote_address: refused (never silently unlimited).
    expect(r.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    expect(r.statuses[1]?.current_limit?.requests_per_unit).toBe(0);
    expect(headers(r.response_headers_to_add)['Retry-After']).toBe('50');
  });

  it('reports the day window when it is closer to its limit', async () => {
    const { service, store } = setup();
    store.counts.set(`prl:{platform-api%2Fpublic-api|d}:d:${Math.floor(NOW / 86_400_000)}`, 995);
    const r = await service.shouldRateLimit(check('d'));
    expect(r.statuses[0]?.current_limit).toEqual({ requests_per_unit: 1000, unit: 'DAY' });
    expect(headers(r.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '1000',
      'X-RateLimit-Remaining': '4',
      'X-RateLimit-Reset': DAY_END_S,
    });
  });

  it('answers from local counts with headers when the store fails (local, the default), and refuses past the limit', async () => {
    const local = setup('local');
    local.store.failing = true;
    const first = await local.service.shouldRateLimit(check('k', { hits_addend: 59 }));
    expect(first).toEqual({
      overall_code: 'OK',
      statuses: [
        {
          code: 'OK',
          current_limit: { requests_per_unit: 60, unit: 'MINUTE', name: DEGRADED_STATUS_NAME },
          limit_remaining: 1,
          duration_until_reset: { seconds: 50 },
        },
      ],
      response_headers_to_add: [
        { key: 'X-RateLimit-Limit', value: '60' },
        { key: 'X-RateLimit-Remaining', value: '1' },
        { key: 'X-RateLimit-Reset', value: MINUTE_END_S },
      ],
    });
    await local.service.shouldRateLimit(check('k'));
    const refused = await local.service.shouldRateLimit(check('k'));
    expect(refused.overall_code).toBe('OVER_LIMIT');
    expect(headers(refused.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': MINUTE_END_S,
      'Retry-After': '50',
    });
    // The breaker opened at the first failure: the later checks did not wait for the store.
    expect(local.store.calls).toHaveLength(1);
    expect(await metricLines(local.metrics, 'portico_ratelimit_degraded_checks_total')).toEqual([
      'portico_ratelimit_degraded_checks_total{reason="admitted"} 2',
      'portico_ratelimit_degraded_checks_total{reason="minute"} 1',
    ]);
    expect(await metricLines(local.metrics, 'portico_ratelimit_degraded')).toEqual([
      'portico_ratelimit_degraded 1',
    ]);
    expect(await metricLines(local.metrics, 'portico_ratelimit_store_failures_total')).toEqual([
      'portico_ratelimit_store_failures_total{failure_mode="local"} 3',
    ]);
    const logged = local.logLines.filter((l) => l.includes('Redis unavailable'));
    expect(logged).toHaveLength(1);
  });

  it('goes back to the store once a probe after the open interval succeeds; local counts are not replayed', async () => {
    let now = NOW;
    const local = setup('local', undefined, () => now);
    local.store.failing = true;
    await local.service.shouldRateLimit(check('p', { hits_addend: 10 }));
    local.store.failing = false;
    // Within the open interval (1 s by default): local, no store call.
    await local.service.shouldRateLimit(check('p'));
    expect(local.store.calls).toHaveLength(1);
    now += 1_050;
    const probe = await local.service.shouldRateLimit(check('p'));
    expect(local.store.calls).toHaveLength(2);
    // The store never saw the 11 hits counted locally.
    expect(headers(probe.response_headers_to_add)['X-RateLimit-Remaining']).toBe('59');
    expect(probe.statuses[0]?.current_limit?.name).toBeUndefined();
    expect(await metricLines(local.metrics, 'portico_ratelimit_degraded')).toEqual([
      'portico_ratelimit_degraded 0',
    ]);
    await local.service.shouldRateLimit(check('p'));
    expect(local.store.calls).toHaveLength(3);
  });

  it('with allow, answers OK with the local counts in the headers, even past the limit', async () => {
    const allow = setup('allow');
    allow.store.failing = true;
    await allow.service.shouldRateLimit(check('k', { hits_addend: 60 }));
    const past = await allow.service.shouldRateLimit(check('k'));
    expect(past.overall_code).toBe('OK');
    expect(headers(past.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': MINUTE_END_S,
    });
    const deny = setup('deny');
    deny.store.failing = true;
    const r = await deny.service.shouldRateLimit(check('k'));
    expect(r.overall_code).toBe('OVER_LIMIT');
    expect(r.statuses[0]).toEqual({
      code: 'OVER_LIMIT',
      current_limit: { requests_per_unit: 60, unit: 'MINUTE', name: DEGRADED_STATUS_NAME },
      limit_remaining: 0,
      duration_until_reset: { seconds: 1 },
    });
    expect(headers(r.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(Math.ceil((NOW + 1000) / 1000)),
      'Retry-After': '1',
    });
    expect(await metricLines(deny.metrics, 'portico_ratelimit_store_failures_total')).toEqual([
      'portico_ratelimit_store_failures_total{failure_mode="deny"} 1',
    ]);
    expect(await metricLines(deny.metrics, 'portico_ratelimit_checks_total')).toEqual([
      `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="store_unavailable"} 1`,
    ]);
  });

  it('refuses a request over a bound before looking anything up or counting, and counts the refusal', async () => {
    const { service, store, metrics } = setup();
    const tooMany = {
      domain: DOMAIN,
      descriptors: Array.from({ length: 17 }, (_, i) => ({ entries: [{ key: 'key_id', value: `k${i}` }] })),
    };
    const err = await service.shouldRateLimit(tooMany).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect((err as Error).message).toContain('the request has 17 descriptors; at most 16 are allowed');
    await expect(service.shouldRateLimit(check('k'.repeat(1025)))).rejects.toThrow(
      'descriptors[0].entries[0].value is 1025 characters long; at most 1024 are allowed',
    );
    expect(store.calls).toHaveLength(0);
    expect(await metricLines(metrics, 'portico_ratelimit_invalid_requests_total')).toEqual([
      'portico_ratelimit_invalid_requests_total{bound="descriptors"} 1',
      'portico_ratelimit_invalid_requests_total{bound="entries"} 0',
      'portico_ratelimit_invalid_requests_total{bound="entry_length"} 1',
      'portico_ratelimit_invalid_requests_total{bound="domain_length"} 0',
    ]);
    // At the bounds it is answered (16 descriptors, a key id of 1024 characters).
    const atBounds = await service.shouldRateLimit({
      domain: DOMAIN,
      descriptors: Array.from({ length: 16 }, (_, i) => ({
        entries: [{ key: 'key_id', value: `${i}`.padEnd(1024, 'x') }],
      })),
    });
    expect(atBounds.statuses).toHaveLength(16);
    expect(store.calls).toHaveLength(16);
  });

  it('records the duration of each call', async () => {
    const { service, metrics } = setup();
    await service.shouldRateLimit(check('t'));
    await service.shouldRateLimit({ domain: 'nobody/here' });
    expect(await metricLines(metrics, 'portico_ratelimit_check_duration_seconds_count')).toEqual([
      'portico_ratelimit_check_duration_seconds_count 2',
    ]);
  });

  it('in shadow mode counts and decides as ever but answers OK, without Retry-After, and counts what it would refuse', async () => {
    const { service, metrics, store } = setup('local', undefined, () => NOW, { shadowMode: true });
    await service.shouldRateLimit(check('s', { hits_addend: 60 }));
    const would = await service.shouldRateLimit(check('s'));
    expect(would.overall_code).toBe('OK');
    expect(would.statuses[0]?.code).toBe('OVER_LIMIT');
    expect(headers(would.response_headers_to_add)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': MINUTE_END_S,
    });
    expect(store.calls).toHaveLength(2);
    expect(await metricLines(metrics, 'portico_ratelimit_shadow_refusals_total')).toEqual([
      `portico_ratelimit_shadow_refusals_total{domain="${DOMAIN}",reason="minute"} 1`,
    ]);
    expect(await metricLines(metrics, 'portico_ratelimit_checks_total')).toContain(
      `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="minute"} 1`,
    );
  });

  it('answers a key whose window is full from memory until the window ends (a policy without a ban)', async () => {
    const noBan = indexPolicy({ ...policy, ban: undefined });
    let now = NOW;
    const { service, metrics, store } = setup('local', undefined, () => now, {
      policies: { byDomain: new Map([[DOMAIN, noBan]]) },
    });
    await service.shouldRateLimit(check('full', { hits_addend: 60 }));
    const first = await service.shouldRateLimit(check('full'));
    const again = await service.shouldRateLimit(check('full'));
    expect(store.calls).toHaveLength(2);
    expect(again).toEqual(first);
    expect(again.overall_code).toBe('OVER_LIMIT');
    expect(await metricLines(metrics, 'portico_ratelimit_over_limit_cache_hits_total')).toEqual([
      'portico_ratelimit_over_limit_cache_hits_total 1',
    ]);
    now += 50_000; // the next minute: Redis again
    expect((await service.shouldRateLimit(check('full'))).overall_code).toBe('OK');
    expect(store.calls).toHaveLength(3);
  });

  it('sends refusals of a policy with a ban to Redis (they count toward it), and answers the ban from memory', async () => {
    const { service, store } = setup();
    await service.shouldRateLimit(check('b', { hits_addend: 60 }));
    for (let i = 0; i < 3; i++) await service.shouldRateLimit(check('b'));
    expect(store.calls).toHaveLength(4); // the third refusal started the ban
    const banned = await service.shouldRateLimit(check('b'));
    expect(banned.overall_code).toBe('OVER_LIMIT');
    expect(headers(banned.response_headers_to_add)['Retry-After']).toBe('900');
    expect(store.calls).toHaveLength(4);
  });
});

describe('a store in shards (a Redis Cluster)', () => {
  /** Keys of key ids starting with `down-` live on a primary that does not answer. */
  class ShardedStore extends MemoryStore {
    shardOf(keys: CounterKeys): string {
      return keys.minute.includes('down-') ? 'primary-down' : 'primary-up';
    }

    override checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
      if (this.shardOf(keys) === 'primary-down') {
        this.calls.push({ keys, args });
        return Promise.reject(new StoreUnavailableError('Connection is closed.'));
      }
      return super.checkAndCount(keys, args);
    }
  }

  it('opens the breaker of the shard that failed only: the others are still counted in the store', async () => {
    const store = new ShardedStore();
    const metrics = createRateLimitMetrics(() => NOW);
    const service = new RateLimitService({
      policies: () => snapshot,
      store,
      failureMode: 'local',
      now: () => NOW,
      monotonicNow: () => NOW,
      metrics,
      log: pino({ level: 'silent' }),
    });
    const down = await service.shouldRateLimit(check('down-1'));
    expect(down.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(headers(down.response_headers_to_add)['X-RateLimit-Remaining']).toBe('59');
    // A second key of the down shard skips the store (its breaker is open)...
    await service.shouldRateLimit(check('down-2'));
    expect(store.calls.filter((c) => c.keys.minute.includes('down-'))).toHaveLength(1);
    // ...while keys of the other shard are counted in the store.
    const up = await service.shouldRateLimit(check('up-1'));
    const upAgain = await service.shouldRateLimit(check('up-1'));
    expect(up.statuses[0]?.current_limit?.name).toBeUndefined();
    expect(headers(upAgain.response_headers_to_add)['X-RateLimit-Remaining']).toBe('58');
    expect(
      [...store.counts.entries()].filter(([k, v]) => k.includes('up-1') && k.includes(':m:') && v === 2),
    ).toHaveLength(1);
    expect(await metricLines(metrics, 'portico_ratelimit_degraded')).toEqual([
      'portico_ratelimit_degraded 1',
    ]);
  });
});
