import { describe, expect, it } from 'vitest';
import { selectRenewalTime, serialValueOctets } from './ari.js';

describe('serialValueOctets', () => {
  it('keeps a positive serial positive with a leading zero octet (DER INTEGER)', () => {
    expect(Buffer.from(serialValueOctets('87654321')).toString('hex')).toBe('0087654321');
    expect(Buffer.from(serialValueOctets('7f01')).toString('hex')).toBe('7f01');
    expect(Buffer.from(serialValueOctets('abc')).toString('hex')).toBe('0abc');
  });
});

describe('selectRenewalTime', () => {
  const window = { start: '2026-03-01T00:00:00Z', end: '2026-03-03T00:00:00Z' };
  it('picks a time inside the window', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(selectRenewalTime(window, now, () => 0).toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(selectRenewalTime(window, now, () => 0.5).toISOString()).toBe('2026-03-02T00:00:00.000Z');
  });
  it('renews now when the window has passed, and never before now inside it', () => {
    const late = new Date('2026-04-01T00:00:00Z');
    expect(selectRenewalTime(window, late, () => 0.9)).toEqual(late);
    const inside = new Date('2026-03-02T00:00:00Z');
    expect(selectRenewalTime(window, inside, () => 0).getTime()).toBe(inside.getTime());
  });
});
