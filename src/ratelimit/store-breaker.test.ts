import { describe, expect, it } from 'vitest';
import { StoreBreaker } from './store-breaker.js';

describe('StoreBreaker', () => {
  it('opens at a failure, lets one probe through after the open interval, closes on its success', () => {
    const b = new StoreBreaker(1_000);
    expect(b.tryStore(0)).toBe(true);
    b.failure(0);
    expect(b.degraded).toBe(true);
    expect(b.tryStore(999)).toBe(false);
    expect(b.tryStore(1_000)).toBe(true); // the probe
    expect(b.tryStore(1_001)).toBe(false); // one at a time
    b.success();
    expect(b.degraded).toBe(false);
    expect(b.tryStore(1_002)).toBe(true);
    expect(b.tryStore(1_002)).toBe(true);
  });

  it('opens again for the whole interval when the probe fails', () => {
    const b = new StoreBreaker(1_000);
    b.failure(0);
    expect(b.tryStore(1_500)).toBe(true);
    b.failure(2_000);
    expect(b.tryStore(2_999)).toBe(false);
    expect(b.tryStore(3_000)).toBe(true);
  });
});
