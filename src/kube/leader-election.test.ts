import { describe, expect, it } from 'vitest';
import { canAcquire, microTime } from './leader-election.js';

describe('canAcquire', () => {
  const now = new Date('2026-01-01T00:01:00Z');
  it('takes a free lease or keeps our own', () => {
    expect(canAcquire(undefined, 'me', now)).toBe(true);
    expect(canAcquire({ holderIdentity: '' }, 'me', now)).toBe(true);
    expect(
      canAcquire(
        { holderIdentity: 'me', renewTime: '2026-01-01T00:00:59Z', leaseDurationSeconds: 15 },
        'me',
        now,
      ),
    ).toBe(true);
  });
  it("waits for another holder's lease to expire", () => {
    const held = { holderIdentity: 'other', leaseDurationSeconds: 15 };
    expect(canAcquire({ ...held, renewTime: '2026-01-01T00:00:50Z' }, 'me', now)).toBe(false);
    expect(canAcquire({ ...held, renewTime: '2026-01-01T00:00:44Z' }, 'me', now)).toBe(true);
  });
});

describe('microTime', () => {
  it('writes six fractional digits', () => {
    expect(microTime(new Date('2026-01-01T00:00:00.123Z'))).toBe('2026-01-01T00:00:00.123000Z');
  });
});
