import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LoadReport } from '../../ratelimit/load-report.js';
import { enforcedVerdict } from './enforced.js';
import { ReportLiveness } from './report-liveness.js';

const T0 = Date.parse('2026-11-27T10:00:00Z');

function report(instance: string, heartbeatMs: number, intervalSeconds = 10): LoadReport {
  return {
    instance,
    heartbeatTime: new Date(heartbeatMs).toISOString(),
    heartbeatIntervalSeconds: intervalSeconds,
    policies: {},
    loaded: {},
  };
}

describe('ReportLiveness', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('calls onChange when a report comes, and again 1 s after it goes stale with no new reading', () => {
    const onChange = vi.fn();
    const liveness = new ReportLiveness(() => Date.now(), onChange);
    liveness.update([report('a', T0)]);
    expect(onChange).toHaveBeenCalledTimes(1);
    // Stale at T0 + 30 s (three intervals of 10 s); the look is 1 s later.
    vi.advanceTimersByTime(30_999);
    expect(onChange).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1);
    expect(onChange).toHaveBeenCalledTimes(2);
    expect(liveness.judgedAtMs).toBe(T0 + 31_000);
    liveness.stop();
  });

  it('does not call onChange for a reading that keeps the same live reports', () => {
    const onChange = vi.fn();
    const liveness = new ReportLiveness(() => Date.now(), onChange);
    liveness.update([report('a', T0), report('b', T0)]);
    vi.advanceTimersByTime(10_000);
    liveness.update([report('b', T0 + 10_000), report('a', T0 + 10_000)]);
    vi.advanceTimersByTime(25_000);
    expect(onChange).toHaveBeenCalledTimes(1);
    liveness.stop();
  });

  it('keeps verdicts on the last look: a report refreshed just after it went stale never drops its server', () => {
    const onChange = vi.fn();
    const liveness = new ReportLiveness(() => Date.now(), onChange);
    liveness.update([report('a', T0)]);
    // 30.5 s: the report is stale by the clock, the next look is at 31 s.
    vi.advanceTimersByTime(30_500);
    const verdict = enforcedVerdict({
      domain: 'ns/p',
      uid: 'u',
      generation: 1,
      accepted: true,
      reports: [report('a', T0)],
      nowMs: liveness.judgedAtMs,
      statusConfigMap: 'portico-system/portico-ratelimit-status',
    });
    expect(verdict.reason).not.toBe('NoRateLimitServer');
    // Its late heartbeat arrives before the look: the live set is the same, nothing to queue.
    liveness.update([report('a', T0 + 30_400)]);
    vi.advanceTimersByTime(1_000);
    expect(onChange).toHaveBeenCalledTimes(1);
    liveness.stop();
  });

  it('caps the next look at the longest timer delay for a heartbeat time far ahead', () => {
    // A longer delay would fire at once, and the look would set it again: a busy loop.
    const setTimer = vi.spyOn(globalThis, 'setTimeout');
    const liveness = new ReportLiveness(() => Date.now(), vi.fn());
    liveness.update([report('future', T0 + 40 * 24 * 3600 * 1000)]);
    expect(setTimer).toHaveBeenCalledTimes(1);
    expect(setTimer.mock.calls[0]?.[1]).toBe(2 ** 31 - 1);
    liveness.stop();
    expect(vi.getTimerCount()).toBe(0);
  });
});
