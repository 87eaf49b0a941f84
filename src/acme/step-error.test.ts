import { describe, expect, it } from 'vitest';
import { AcmeRateLimitedError } from './rate-limit.js';
import { AcmeRequestTimeoutError } from './request-timeout.js';
import { AcmeServerError } from './server-error.js';
import { AcmeStepError } from './step-error.js';

const receivedAt = new Date('2026-01-01T00:00:00.000Z');

describe('AcmeStepError', () => {
  const errors = [
    new AcmeRateLimitedError({
      status: 429,
      problemType: undefined,
      detail: 'slow down',
      retryAfter: undefined,
      receivedAt,
    }),
    new AcmeServerError({
      status: 500,
      problemType: 'urn:ietf:params:acme:error:serverInternal',
      detail: 'oops',
    }),
    new AcmeRequestTimeoutError({ method: 'POST', url: 'https://ca.test/new-order', timeoutMs: 30_000 }),
  ];

  it.each(errors)(
    '$name placed at a step keeps its class, facts and code, with the first as its cause',
    (err) => {
      const placed = err.during('finalize', 'www.example.com');
      expect(placed).toBeInstanceOf(err.constructor);
      expect(placed).toBeInstanceOf(AcmeStepError);
      expect(placed).toBeInstanceOf(Error);
      expect(placed.name).toBe(err.name);
      expect(placed.code).toBe(err.code);
      expect(placed.reason).toBe(err.reason);
      expect(placed.context).toEqual({ step: 'finalize', hostname: 'www.example.com' });
      expect(placed.cause).toBe(err);
      expect(placed.message).toContain('the finalize for www.example.com');
      expect(err.context).toBeUndefined();
    },
  );

  it('keeps each class its own fields', () => {
    const [rateLimited, server, timeout] = errors;
    expect(rateLimited).toBeInstanceOf(AcmeRateLimitedError);
    expect((rateLimited as AcmeRateLimitedError).during('new order', 'a.test').answer.detail).toBe(
      'slow down',
    );
    expect((server as AcmeServerError).during('new order', 'a.test').answer.status).toBe(500);
    expect((timeout as AcmeRequestTimeoutError).during('new order', 'a.test').request.timeoutMs).toBe(30_000);
    expect(server).not.toBeInstanceOf(AcmeRateLimitedError);
  });
});
