/**
 * What the order budget (`OrderBudget`, order-budget.ts) is asked and answers: the shapes of a
 * request and of its decision, the sentence a queued answer carries, and when an answer given
 * earlier still stands, so that a waiting domain's status is not rewritten at every look. Pure.
 */
import { MINUTE_MS, SECOND_MS } from './order-limits.js';

/** Whether the order renews a certificate the domain already has, or is its first one. */
export type OrderKind = 'renewal' | 'first-issuance';

/** How an admitted order ended. */
export type OrderOutcome = 'valid' | 'failed-validation' | 'failed-other';

/** Why a request waits; UpperCamelCase, usable as a condition reason. */
export type OrderQueueReason =
  'AccountOrderBudget' | 'RegisteredDomainBudget' | 'FailedValidationLimit' | 'OrdersInFlightCap';

/**
 * A domain asking to place an order. Only a key's first request is recorded: later ones, until the
 * key has settled or is withdrawn, change nothing even when their fields differ.
 */
export interface OrderRequest {
  /** The domain's key, `namespace/name` (the `IssuanceTracker` key): one order at a time per key. */
  readonly key: string;
  /** The tenant the domain belongs to (its namespace): the unit of fairness. */
  readonly tenant: string;
  /** The DNS name ordered; the failed-validation limit is per hostname. */
  readonly hostname: string;
  /**
   * The hostname's registered domain (eTLD+1, e.g. `example.co.uk` for `www.shop.example.co.uk`),
   * computed by the caller from the Public Suffix List; the certificate budget is per registered domain.
   */
  readonly registeredDomain: string;
  readonly kind: OrderKind;
  /** Since when the domain has needed this certificate: the order within its tenant (oldest first, then in order of first request). */
  readonly queuedAt: Date;
}

/** The caller may place the order now. */
export interface OrderAdmitted {
  readonly admitted: true;
  /** When the budget admitted (and counted) the order. */
  readonly admittedAt: Date;
  /**
   * True when an earlier call admitted this key and it has not settled: this call counted nothing,
   * and the order admitted then is still the one counted. Place no second order for it.
   */
  readonly alreadyInFlight: boolean;
}

/** The request waits; ask again at `expectedAt` (or sooner). */
export interface OrderQueued {
  readonly admitted: false;
  /** The limit it waits for. */
  readonly reason: OrderQueueReason;
  /**
   * 1-based place in the line for that limit: among all waiting requests for the account budget and
   * the in-flight cap, among the requests of its registered domain for `RegisteredDomainBudget`, among
   * those of its hostname for `FailedValidationLimit`. A repeated answer (see `OrderBudget.request`)
   * names the place it had when its estimate was made (or, when the turn is due within seconds, a
   * place others may since have come ahead of).
   */
  readonly position: number;
  /**
   * Best estimate of when its turn comes, rounded up to the second: from the window arithmetic (when
   * enough past events leave the window for its position) and, for the in-flight cap, from the mean
   * duration of recent orders plus the mean time from a slot freed to the next order admitted (the
   * caller's re-queue and a free worker: about a fifth of a slot's cycle in a busy benchmark). For the domain and hostname limits, the time that limit frees: the
   * request may then still wait its turn for the account budget.
   */
  readonly expectedAt: Date;
  /**
   * A sentence naming the limit, e.g. "Queued for the CA's order budget (300 new orders per 3
   * hours): position 412, expected at 2026-11-25T14:03:00Z."
   */
  readonly message: string;
}

export type OrderDecision = OrderAdmitted | OrderQueued;

/** A repeated answer's expected time may be off by this share of the wait left (see `stillHolds`). */
const ESTIMATE_TOLERANCE = 0.1;
/** …or by this much, whichever is more (ms). */
const ESTIMATE_TOLERANCE_MIN_MS = MINUTE_MS;
/**
 * A repeated answer's place may be up to this many times the place it has: halving (2) still
 * rewrote most of a draining line at each resync, as a place halves within one resync near the end.
 */
const PLACE_REFRESH_FACTOR = 10;
/**
 * A repeated answer stands, whatever the place, while the fresh one expects the turn within this
 * long (ms), and its own time has not been passed by more than that: 5 s, the reconciler's
 * ORDER_PROGRESS_STATUS_DELAY_MS. The status write after the turn (the certificate stored, or the
 * order's progress) follows within seconds; telling the place first cost a status write per domain
 * in a line at the order slots (the place fell to the front or to a tenth in its last seconds, or an
 * estimate a second early passed; docs/performance.md, twelfth round).
 */
const IMMINENT_TURN_MS = 5_000;

/**
 * Whether a waiting request's last answer `told` may be given again instead of `fresh`, so that a
 * status showing it is not rewritten at every look (a periodic resync of a long line would otherwise
 * rewrite every waiting domain's place). It holds while it waits for the same limit and either
 * `fresh` expects the turn within IMMINENT_TURN_MS and `told`'s expected time is not more than that
 * past (the write after the turn follows within seconds; the time shown is then at most that late),
 * or `told`'s expected time has not passed, `fresh`'s is within ESTIMATE_TOLERANCE of the wait left
 * (at least ESTIMATE_TOLERANCE_MIN_MS) of it, and its place has neither grown (others came ahead of
 * it) nor fallen to a PLACE_REFRESH_FACTOR-th of it or to the front (1): the place it names is then
 * the place it had when that estimate was made, never better than the place it has (but when the
 * turn is imminent, when others may have come ahead of it).
 */
export function stillHolds(told: OrderQueued, fresh: OrderQueued, nowMs: number): boolean {
  const toldAtMs = told.expectedAt.getTime();
  if (told.reason !== fresh.reason) return false;
  const imminent = fresh.expectedAt.getTime() - nowMs <= IMMINENT_TURN_MS;
  if (imminent && nowMs - toldAtMs < IMMINENT_TURN_MS) return true;
  if (nowMs >= toldAtMs) return false;
  if (fresh.position > told.position || fresh.position * PLACE_REFRESH_FACTOR <= told.position) return false;
  if (fresh.position === 1 && told.position !== 1) return false;
  const toleranceMs = Math.max(ESTIMATE_TOLERANCE_MIN_MS, (toldAtMs - nowMs) * ESTIMATE_TOLERANCE);
  return Math.abs(fresh.expectedAt.getTime() - toldAtMs) <= toleranceMs;
}

export function queued(reason: OrderQueueReason, position: number, atMs: number, what: string): OrderQueued {
  const expectedAt = new Date(Math.ceil(atMs / SECOND_MS) * SECOND_MS);
  const when = `${expectedAt.toISOString().slice(0, 19)}Z`;
  const verb = reason === 'FailedValidationLimit' ? 'Waiting out' : 'Queued for';
  return {
    admitted: false,
    reason,
    position,
    expectedAt,
    message: `${verb} ${what}: position ${position}, expected at ${when}.`,
  };
}
