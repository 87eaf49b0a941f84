import * as acme from 'acme-client';
import { describe, expect, it } from 'vitest';
import {
  AcmeRateLimitedError,
  failFastOnRateLimit,
  MAX_RETRY_AFTER_MS,
  parseRetryAfter,
  RATE_LIMITED_PROBLEM,
  RateLimitGate,
  rateLimitOf,
} from './rate-limit.js';

const now = new Date('2026-05-01T12:00:00.000Z');

describe('parseRetryAfter', () => {
  it('reads delay-seconds and HTTP-dates (RFC 9110 §10.2.3)', () => {
    expect(parseRetryAfter('120', now)?.toISOString()).toBe('2026-05-01T12:02:00.000Z');
    expect(parseRetryAfter(' 5 ', now)?.toISOString()).toBe('2026-05-01T12:00:05.000Z');
    expect(parseRetryAfter('Fri, 01 May 2026 13:30:00 GMT', now)?.toISOString()).toBe(
      '2026-05-01T13:30:00.000Z',
    );
  });
  it('ignores what is absent, malformed or not in the future', () => {
    for (const value of [undefined, '', '0', '-5', '1.5', 'soon', 'Fri, 01 May 2026 11:00:00 GMT']) {
      expect(parseRetryAfter(value, now), String(value)).toBeUndefined();
    }
  });
  it('clamps an absurd wait to 24 hours', () => {
    expect(parseRetryAfter('999999999', now)?.getTime()).toBe(now.getTime() + MAX_RETRY_AFTER_MS);
  });
});

describe('rateLimitOf', () => {
  const problem = { type: RATE_LIMITED_PROBLEM, detail: 'too many\n new orders', status: 429 };

  it('makes a 429 an AcmeRateLimitedError that names the answer and when to ask again', () => {
    const err = rateLimitOf(429, problem, '30', now);
    expect(err).toBeInstanceOf(AcmeRateLimitedError);
    expect(err?.reason).toBe('CARateLimited');
    expect(err?.code).toBe('ACME_RATE_LIMITED');
    expect(err?.retryAfter?.toISOString()).toBe('2026-05-01T12:00:30.000Z');
    expect(err?.answer.detail).toBe('too many new orders');
    expect(err?.message).toBe(
      'the ACME CA rate-limited a request (HTTP 429 Too Many Requests, urn:ietf:params:acme:error:rateLimited: too many new orders); it asked for no new request before 2026-05-01T12:00:30.000Z (Retry-After)',
    );
  });
  it('knows a rateLimited problem whatever its status, and a bare 429', () => {
    expect(rateLimitOf(403, problem, undefined, now)?.answer.status).toBe(403);
    const bare = rateLimitOf(429, 'Too Many Requests', undefined, now);
    expect(bare?.retryAfter).toBeUndefined();
    expect(bare?.message).toBe(
      'the ACME CA rate-limited a request (HTTP 429 Too Many Requests); it named no Retry-After time, so the published retry schedule applies',
    );
  });
  it('leaves every other answer alone', () => {
    expect(rateLimitOf(200, { status: 'valid' }, '30', now)).toBeUndefined();
    expect(rateLimitOf(400, { type: 'urn:ietf:params:acme:error:badNonce' }, undefined, now)).toBeUndefined();
    expect(rateLimitOf(503, undefined, '30', now)).toBeUndefined();
    expect(rateLimitOf(undefined, problem, '30', now)).toBeUndefined();
  });
  it('places the answer in the order with during()', () => {
    const err = rateLimitOf(429, problem, '30', now)?.during('new order', 'www.shop.example');
    expect(err?.message).toMatch(/^the ACME CA rate-limited the new order for www\.shop\.example \(HTTP 429/);
    expect(err?.retryAfter?.toISOString()).toBe('2026-05-01T12:00:30.000Z');
    expect(err?.cause).toBeInstanceOf(AcmeRateLimitedError);
  });
});

describe('RateLimitGate', () => {
  const limited = (retryAfter: string | undefined): AcmeRateLimitedError => {
    const err = rateLimitOf(429, { type: RATE_LIMITED_PROBLEM, detail: 'slow down' }, retryAfter, now);
    if (!err) throw new Error('not a rate limit');
    return err.during('new order', 'a.example');
  };

  it('withholds requests for that name until the Retry-After time, then lets them go', () => {
    const gate = new RateLimitGate();
    gate.record('a.example', limited('60'));
    gate.check('b.example', now);
    let thrown: unknown;
    try {
      gate.check('a.example', new Date(now.getTime() + 59_000));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(AcmeRateLimitedError);
    const withheld = thrown as AcmeRateLimitedError;
    expect(withheld.context).toEqual({ step: 'new order', hostname: 'a.example', withheld: true });
    expect(withheld.retryAfter?.toISOString()).toBe('2026-05-01T12:01:00.000Z');
    expect(withheld.message).toBe(
      'the ACME CA rate-limited the new order for a.example at 2026-05-01T12:00:00.000Z (HTTP 429 Too Many Requests, urn:ietf:params:acme:error:rateLimited: slow down); it asked for no new request before 2026-05-01T12:01:00.000Z (Retry-After), so nothing was sent to it this time',
    );
    gate.check('a.example', new Date(now.getTime() + 60_000));
    // Forgotten once passed.
    gate.check('a.example', new Date(now.getTime() + 1_000));
  });
  it('does not hold a name whose refusal named no time', () => {
    const gate = new RateLimitGate();
    gate.record('a.example', limited(undefined));
    gate.check('a.example', now);
  });
});

describe('failFastOnRateLimit on acme-client’s HTTP client', () => {
  /** An adapter that answers like axios's http adapter does under acme-client (every status rejects). */
  function answering(status: number, headers: Record<string, string>, body: string) {
    const calls: unknown[] = [];
    const adapter = (config: unknown): Promise<never> => {
      calls.push(config);
      const response = { status, statusText: '', headers, data: body, config, request: {} };
      return Promise.reject(
        Object.assign(new Error(`Request failed with status code ${status}`), { config, response }),
      );
    };
    return { calls, adapter };
  }

  it('ends a 429 at once with AcmeRateLimitedError instead of sleeping and replaying it', async () => {
    failFastOnRateLimit(acme.axios);
    failFastOnRateLimit(acme.axios); // idempotent
    const { calls, adapter } = answering(
      429,
      { 'retry-after': '3600', 'content-type': 'application/problem+json' },
      JSON.stringify({ type: RATE_LIMITED_PROBLEM, detail: 'too many new orders' }),
    );
    const started = Date.now();
    const request = acme.axios.request({
      url: 'https://ca.invalid/acme/new-order',
      method: 'post',
      adapter,
    });
    await expect(request).rejects.toBeInstanceOf(AcmeRateLimitedError);
    const err = (await request.catch((e: unknown) => e)) as AcmeRateLimitedError;
    expect(calls).toHaveLength(1);
    expect(err.answer.detail).toBe('too many new orders');
    expect(err.retryAfter?.getTime()).toBeGreaterThanOrEqual(started + 3_600_000 - 1_000);
  });
});
