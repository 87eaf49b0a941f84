import { describe, expect, it } from 'vitest';
import { InvalidRequestError, isInvalidRequestError } from './errors.js';
import type { RateLimitRequest } from './protocol.js';
import { checkRequestLimits, DEFAULT_REQUEST_LIMITS, type RequestBound } from './request-limits.js';

const descriptor = (entries: number, length = 1): { entries: { key: string; value: string }[] } => ({
  entries: Array.from({ length: entries }, (_, i) => ({ key: `e${i}`, value: 'v'.repeat(length) })),
});

function refusal(request: RateLimitRequest): InvalidRequestError {
  try {
    checkRequestLimits(request);
  } catch (err: unknown) {
    if (err instanceof InvalidRequestError) return err;
    throw err;
  }
  throw new Error('expected InvalidRequestError');
}

describe('checkRequestLimits', () => {
  it('has the documented defaults', () => {
    expect(DEFAULT_REQUEST_LIMITS).toEqual({
      maxDescriptors: 16,
      maxEntriesPerDescriptor: 16,
      maxEntryLength: 1024,
      maxDomainLength: 512,
    });
  });

  it('accepts a request at every bound, and an empty one', () => {
    expect(() => {
      checkRequestLimits({
        domain: 'd'.repeat(512),
        descriptors: Array.from({ length: 16 }, () => descriptor(16, 1024)),
      });
    }).not.toThrow();
    expect(() => {
      checkRequestLimits({});
    }).not.toThrow();
  });

  const cases: [string, RateLimitRequest, RequestBound, string][] = [
    [
      'descriptors',
      { domain: 'a/b', descriptors: Array.from({ length: 17 }, () => descriptor(1)) },
      'descriptors',
      'the request has 17 descriptors; at most 16 are allowed',
    ],
    [
      'entries of one descriptor',
      { domain: 'a/b', descriptors: [descriptor(1), descriptor(2), descriptor(17)] },
      'entries',
      'descriptors[2] has 17 entries; at most 16 are allowed',
    ],
    [
      'the length of a value',
      {
        domain: 'a/b',
        descriptors: [descriptor(3), { entries: [{ key: 'key_id', value: 'k'.repeat(1025) }] }],
      },
      'entry_length',
      'descriptors[1].entries[0].value is 1025 characters long; at most 1024 are allowed',
    ],
    [
      'the length of a key',
      { domain: 'a/b', descriptors: [{ entries: [{ key: 'k', value: '' }, { key: 'x'.repeat(2000) }] }] },
      'entry_length',
      'descriptors[0].entries[1].key is 2000 characters long; at most 1024 are allowed',
    ],
    [
      'the length of the domain',
      { domain: 'd'.repeat(513), descriptors: [descriptor(1)] },
      'domain_length',
      'domain is 513 characters long; at most 512 are allowed',
    ],
  ];
  for (const [what, request, bound, message] of cases) {
    it(`refuses a request over the bound on ${what}`, () => {
      const err = refusal(request);
      expect(err.bound).toBe(bound);
      expect(err.code).toBe('RATELIMIT_INVALID_REQUEST');
      expect(isInvalidRequestError(err)).toBe(true);
      expect(err.message).toContain(message);
    });
  }

  it('takes other limits', () => {
    const limits = { ...DEFAULT_REQUEST_LIMITS, maxDescriptors: 1 };
    expect(() => {
      checkRequestLimits({ descriptors: [descriptor(1), descriptor(1)] }, limits);
    }).toThrow('the request has 2 descriptors; at most 1 are allowed');
  });
});
