/**
 * Which rate-limit servers' load reports are live, followed with the clock: `onChange` runs when the
 * set of live instances differs from the last look (a server came, or its report went stale), and
 * the next look is set for when the first live report goes stale (`nextReportStaleAtMs`, plus 1 s).
 * Verdicts judge liveness at `judgedAtMs`, the moment of the last look, not at their own moment:
 * otherwise a verdict made between a report going stale and the next look could drop a server whose
 * fresh report then arrives before that look, and nothing would queue the policy again.
 */
import type { LoadReport } from '../../ratelimit/load-report.js';
import { liveReports, nextReportStaleAtMs } from './enforced.js';

/** setTimeout's longest delay, milliseconds; a longer one fires at once (Node's TimeoutOverflowWarning). */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export class ReportLiveness {
  readonly #clock: () => number;
  readonly #onChange: () => void;
  #reports: readonly LoadReport[] = [];
  #live = '';
  #judgedAtMs: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  /**
   * @param clock the time, Unix ms
   * @param onChange called when the set of live instances changes
   */
  constructor(clock: () => number, onChange: () => void) {
    this.#clock = clock;
    this.#onChange = onChange;
    this.#judgedAtMs = clock();
  }

  /** When liveness was last judged, Unix ms: the moment a verdict should judge it at. */
  get judgedAtMs(): number {
    return this.#judgedAtMs;
  }

  /** A new reading of the reports: looks again now. */
  update(reports: readonly LoadReport[]): void {
    this.#reports = reports;
    this.#look();
  }

  /** Cancels the next look. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #look(): void {
    clearTimeout(this.#timer);
    const nowMs = this.#clock();
    this.#judgedAtMs = nowMs;
    const live = liveReports(this.#reports, nowMs)
      .map((r) => r.instance)
      .sort()
      .join('\n');
    if (live !== this.#live) {
      this.#live = live;
      this.#onChange();
    }
    const staleAtMs = nextReportStaleAtMs(this.#reports, nowMs);
    if (staleAtMs === undefined || this.#stopped) return;
    const delayMs = Math.min(MAX_TIMER_DELAY_MS, Math.max(0, staleAtMs - nowMs) + 1_000);
    this.#timer = setTimeout(() => {
      this.#look();
    }, delayMs);
    this.#timer.unref();
  }
}
