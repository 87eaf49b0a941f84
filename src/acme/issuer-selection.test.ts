import { describe, expect, it } from 'vitest';
import { AcmeDirectoryError } from './directory.js';
import {
  AcmeIssuanceError,
  CaaForbidsIssuanceError,
  Dns01PublishError,
  IssuanceCancelledError,
} from './issuer.js';
import { DnsUpdateTransportError } from '../dns/update-client.js';
import {
  HEALTHY,
  orderResultOf,
  recordOrderResult,
  selectIssuer,
  type FailoverPolicy,
  type IssuerHealth,
  type OrderResult,
} from './issuer-selection.js';
import { AcmeRateLimitedError } from './rate-limit.js';
import { AcmeRequestTimeoutError } from './request-timeout.js';
import { serverErrorOf } from './server-error.js';

const POLICY: FailoverPolicy = { failuresBeforeFailover: 3, longRetryAfterMs: 600_000, passOverMs: 300_000 };
const NOW = Date.parse('2026-11-27T12:00:00Z');

function rateLimited(retryAfterMs: number | undefined): AcmeRateLimitedError {
  return new AcmeRateLimitedError({
    status: 429,
    problemType: 'urn:ietf:params:acme:error:rateLimited',
    detail: 'too many new orders',
    retryAfter: retryAfterMs === undefined ? undefined : new Date(retryAfterMs),
    receivedAt: new Date(NOW),
  });
}

function connectionRefused(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:14000'), { code: 'ECONNREFUSED' });
}

describe('orderResultOf', () => {
  const cases: [string, unknown, OrderResult][] = [
    ['a 5xx answer', serverErrorOf('post', 503, 'down'), { kind: 'ca-failure' }],
    [
      'no answer in time',
      new AcmeRequestTimeoutError({ method: 'POST', url: 'https://ca/new-order', timeoutMs: 30_000 }),
      { kind: 'ca-failure' },
    ],
    ['an unreadable directory', new AcmeDirectoryError('cannot read'), { kind: 'ca-failure' }],
    ['a refused connection', connectionRefused(), { kind: 'ca-failure' }],
    [
      'a refused connection under a wrapper',
      new Error('request failed', { cause: connectionRefused() }),
      { kind: 'ca-failure' },
    ],
    [
      'a dual-stack connect that failed on both',
      new AggregateError([connectionRefused(), connectionRefused()], 'connect failed'),
      { kind: 'ca-failure' },
    ],
    [
      'an error marked caFailure',
      Object.assign(new Error('eab'), { caFailure: true }),
      { kind: 'ca-failure' },
    ],
    [
      'a rate limit with Retry-After',
      rateLimited(NOW + 3_600_000),
      { kind: 'rate-limited', retryAfterMs: NOW + 3_600_000 },
    ],
    ['a rate limit without Retry-After', rateLimited(undefined), { kind: 'rate-limited' }],
    [
      'a failed validation',
      new AcmeIssuanceError('invalid', { validationFailed: true }),
      { kind: 'not-the-ca' },
    ],
    ['a CAA refusal', new CaaForbidsIssuanceError('no'), { kind: 'not-the-ca' }],
    [
      'the DNS-01 challenge zone refused the update',
      new Dns01PublishError('refused: NOTAUTH, TSIG BADSIG', false),
      { kind: 'not-the-ca' },
    ],
    [
      'the DNS-01 challenge zone unreachable (a refused connection in its cause, still not the CA)',
      new Dns01PublishError('zone down', true, {
        cause: new DnsUpdateTransportError('127.0.0.1:5353', connectionRefused()),
      }),
      { kind: 'not-the-ca' },
    ],
    ['a cancellation', new IssuanceCancelledError('www.example.com'), { kind: 'not-the-ca' }],
    ['a problem the CA answered', new Error('Order is not ready'), { kind: 'not-the-ca' }],
    ['not an error at all', 'boom', { kind: 'not-the-ca' }],
  ];
  it.each(cases)('%s', (_name, err, expected) => {
    expect(orderResultOf(err)).toEqual(expected);
  });
});

describe('recordOrderResult', () => {
  const failing = (n: number): IssuerHealth => ({ consecutiveFailures: n });
  const cases: [string, IssuerHealth, OrderResult, IssuerHealth][] = [
    ['an issued order resets the count', failing(2), { kind: 'issued' }, HEALTHY],
    [
      'an issued order ends a pass-over',
      { consecutiveFailures: 3, passedOverUntilMs: NOW + 1 },
      { kind: 'issued' },
      HEALTHY,
    ],
    ['a failure below the threshold counts', failing(1), { kind: 'ca-failure' }, failing(2)],
    [
      'the failure that reaches the threshold passes the CA over',
      failing(2),
      { kind: 'ca-failure' },
      { consecutiveFailures: 3, passedOverUntilMs: NOW + 300_000 },
    ],
    [
      'a failure after the pass-over ended passes it over again at once',
      { consecutiveFailures: 3, passedOverUntilMs: NOW - 1 },
      { kind: 'ca-failure' },
      { consecutiveFailures: 4, passedOverUntilMs: NOW + 300_000 },
    ],
    ['a failure not the CA’s changes nothing', failing(2), { kind: 'not-the-ca' }, failing(2)],
    [
      'a long Retry-After passes the CA over at once until then',
      HEALTHY,
      { kind: 'rate-limited', retryAfterMs: NOW + 3_600_000 },
      { consecutiveFailures: 1, passedOverUntilMs: NOW + 3_600_000 },
    ],
    [
      'a Retry-After of exactly the threshold counts as long',
      HEALTHY,
      { kind: 'rate-limited', retryAfterMs: NOW + 600_000 },
      { consecutiveFailures: 1, passedOverUntilMs: NOW + 600_000 },
    ],
    [
      'a short Retry-After changes nothing',
      failing(1),
      { kind: 'rate-limited', retryAfterMs: NOW + 60_000 },
      failing(1),
    ],
    ['a rate limit without Retry-After changes nothing', failing(1), { kind: 'rate-limited' }, failing(1)],
    [
      'a pass-over never gets shorter',
      { consecutiveFailures: 5, passedOverUntilMs: NOW + 7_200_000 },
      { kind: 'ca-failure' },
      { consecutiveFailures: 6, passedOverUntilMs: NOW + 7_200_000 },
    ],
  ];
  it.each(cases)('%s', (_name, before, result, after) => {
    expect(recordOrderResult(before, result, NOW, POLICY)).toEqual(after);
  });

  it('with a threshold of 1, the first failure passes the CA over', () => {
    expect(
      recordOrderResult(HEALTHY, { kind: 'ca-failure' }, NOW, { ...POLICY, failuresBeforeFailover: 1 }),
    ).toEqual({
      consecutiveFailures: 1,
      passedOverUntilMs: NOW + 300_000,
    });
  });

  it('refuses a threshold that is not a positive integer', () => {
    expect(() =>
      recordOrderResult(HEALTHY, { kind: 'issued' }, NOW, { ...POLICY, failuresBeforeFailover: 0 }),
    ).toThrow(RangeError);
  });
});

describe('selectIssuer', () => {
  const ORDER = ['primary', 'secondary', 'tertiary'];
  const over = (untilMs: number): IssuerHealth => ({ consecutiveFailures: 3, passedOverUntilMs: untilMs });
  const cases: [string, Record<string, IssuerHealth>, string | undefined, string][] = [
    ['all healthy: the first', {}, undefined, 'primary'],
    [
      'failures below the threshold do not move orders',
      { primary: { consecutiveFailures: 2 } },
      undefined,
      'primary',
    ],
    ['the first passed over: the second', { primary: over(NOW + 1) }, undefined, 'secondary'],
    [
      'the first two passed over: the third',
      { primary: over(NOW + 1), secondary: over(NOW + 1) },
      undefined,
      'tertiary',
    ],
    ['a pass-over that ended: the first again', { primary: over(NOW) }, undefined, 'primary'],
    ['a renewal asks its issuing CA first', {}, 'secondary', 'secondary'],
    [
      'a renewal whose issuing CA is passed over: the first in order',
      { secondary: over(NOW + 1) },
      'secondary',
      'primary',
    ],
    ['an issuing CA no longer configured: the first in order', {}, 'retired', 'primary'],
    [
      'all passed over: the one free first',
      { primary: over(NOW + 3_000), secondary: over(NOW + 1_000), tertiary: over(NOW + 2_000) },
      undefined,
      'secondary',
    ],
    [
      'all passed over until the same time: the preferred, then in order',
      { primary: over(NOW + 1_000), secondary: over(NOW + 1_000), tertiary: over(NOW + 1_000) },
      'tertiary',
      'tertiary',
    ],
  ];
  it.each(cases)('%s', (_name, health, preferred, expected) => {
    expect(selectIssuer(ORDER, new Map(Object.entries(health)), NOW, preferred)).toBe(expected);
  });

  it('refuses an empty list', () => {
    expect(() => selectIssuer([], new Map(), NOW)).toThrow('no ACME issuer is configured');
  });

  it('the threshold, then the pass-over, then the retry, in sequence', () => {
    const health = new Map<string, IssuerHealth>();
    const fail = (at: number): void => {
      const name = selectIssuer(ORDER, health, at);
      health.set(name, recordOrderResult(health.get(name) ?? HEALTHY, { kind: 'ca-failure' }, at, POLICY));
    };
    fail(NOW);
    fail(NOW + 1);
    expect(selectIssuer(ORDER, health, NOW + 2)).toBe('primary');
    fail(NOW + 2);
    expect(selectIssuer(ORDER, health, NOW + 3)).toBe('secondary');
    expect(selectIssuer(ORDER, health, NOW + 2 + 300_000)).toBe('primary');
  });
});
