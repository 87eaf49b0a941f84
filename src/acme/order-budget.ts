/**
 * The order budget of one ACME account: keeps the account inside the CA's published rate limits and
 * decides which waiting domain may place its order next. Pure: no I/O, no timers, no clock of its
 * own; every call whose answer depends on time takes `now` (a Date), and every duration is in
 * milliseconds.
 *
 * When an order counts: at admission. A `request` answered `{ admitted: true, alreadyInFlight: false }`
 * has, in that call, counted one new order against the account window and taken one in-flight slot,
 * whether or not the caller then reaches the CA. The order holds its slot until `settled` (or
 * `withdraw`); a valid certificate then counts against its registered domain, a failed validation
 * against its hostname.
 *
 * How a reconcile uses it, for a domain that needs an order and has no run in flight in the
 * `IssuanceTracker`:
 *
 *  1. `const d = budget.request({ key, tenant, hostname, registeredDomain, kind, queuedAt }, now)`.
 *  2. `d.admitted`: start the order (`tracker.start`); when the run ends, `budget.settled(key,
 *     outcome, now)`. If the order is not started after all, settle it as `'failed-other'` (the
 *     account window keeps counting it: the safe side).
 *  3. Otherwise write `d.reason` and `d.message` into the status and re-queue the key for
 *     `d.expectedAt` (or sooner). Ask again then: the answer is recomputed from the current state.
 *  4. After `settled` (or `withdraw`), re-queue the keys of `budget.admissible(now)`: those whose
 *     turn has come, so the room freed is used without waiting for their `expectedAt`.
 *  5. The domain is deleted or no longer accepted: `budget.withdraw(key)` (and `tracker.cancel`).
 *
 * After a restart the budget knows nothing; seed it with what is known before the first reconcile
 * (`recordPastOrder`, `recordPastCertificate`, `recordPastFailedValidation`), then `enqueue` every
 * domain that needs an order, so the first domains reconciled do not jump the line.
 *
 * The waiting line. Renewals come before first issuance. Within a kind, tenants take turns
 * (round-robin: every tenant's oldest request, then every tenant's second oldest, and so on; a
 * tenant that joins later starts in the current round, and the turns of a tenant with orders still
 * in flight continue after theirs), FIFO by `queuedAt` within a tenant. A request is admitted only
 * when the account window and the in-flight cap have room for everyone in line ahead of it, asked
 * yet or not: asking more often does not overtake. A request held back only by its own registered
 * domain's certificate budget or its own hostname's failed-validation limit stands aside and holds
 * back nobody; requests of one registered domain share its budget in order of kind then `queuedAt`
 * (not round-robin).
 *
 * The limits are sliding windows: at most `limit` events in any `windowMs`. Let's Encrypt computes
 * its limits with token buckets that hold `limit` tokens and refill them over `windowMs`; a sliding
 * window with the same figures never admits more than such a bucket would, so it keeps the account
 * clear of these limits as long as the budget knows every order the account places (and, for the
 * registered domain, every certificate issued for it: the CA counts those of other accounts too).
 *
 * Cost, for n waiting keys: `request`, `enqueue`, `settled` and `withdraw` take O(log n)
 * comparisons plus a few array splices (O(n) memory moves, microseconds at 10,000 keys); a position
 * is a binary search, never a walk of the line. Housekeeping (stale keys, empty windows) walks
 * everything once per shortest window. Memory: one entry per waiting or in-flight key, plus the
 * events still inside their windows; older events are forgotten as the clock passes.
 */
import type { OrderBudgetSnapshot } from '../observability/shared-metrics.js';

const SECOND_MS = 1_000;
const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

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

/** At most `limit` events in any window of `windowMs` milliseconds (a sliding window). */
export interface WindowLimit {
  /** A positive integer. */
  readonly limit: number;
  /** Milliseconds; positive and finite. */
  readonly windowMs: number;
}

export interface OrderBudgetLimits {
  /** New orders the account places (each admission counts one). */
  readonly accountOrders: WindowLimit;
  /** Valid certificates per registered domain (orders in flight for it count too, on the safe side). */
  readonly certificatesPerRegisteredDomain: WindowLimit;
  /** Failed validations per hostname (an order in flight for it counts too, on the safe side). */
  readonly failedValidationsPerHostname: WindowLimit;
  /** Orders in flight at once: admitted and not yet settled. A positive integer. */
  readonly maxInFlight: number;
}

/**
 * The defaults: Let's Encrypt's published limits (https://letsencrypt.org/docs/rate-limits/, as of
 * 2025): "New Orders per Account": 300 per 3 hours; "Certificates per Registered Domain": 50 per
 * 7 days; "Authorization Failures per Hostname per Account" (the Failed Validation limit): 5 per
 * hour. The in-flight cap is Portico's own, not the CA's: it bounds the concurrent challenges and
 * the CA connections. Let's Encrypt exempts renewals of the same set of names from the first two
 * limits; this budget counts them anyway, on the safe side.
 */
export const LETS_ENCRYPT_ORDER_LIMITS: OrderBudgetLimits = Object.freeze({
  accountOrders: Object.freeze({ limit: 300, windowMs: 3 * HOUR_MS }),
  certificatesPerRegisteredDomain: Object.freeze({ limit: 50, windowMs: 7 * DAY_MS }),
  failedValidationsPerHostname: Object.freeze({ limit: 5, windowMs: HOUR_MS }),
  maxInFlight: 50,
});

/** The default `typicalOrderMs`: one minute. */
export const DEFAULT_TYPICAL_ORDER_MS = MINUTE_MS;

/** The default `staleAfterMs`: one hour. */
export const DEFAULT_STALE_AFTER_MS = HOUR_MS;

export interface OrderBudgetOptions {
  /** Overrides of `LETS_ENCRYPT_ORDER_LIMITS`, limit by limit. */
  readonly limits?: Partial<OrderBudgetLimits>;
  /**
   * The order duration (admission to settlement) assumed before any order has settled,
   * milliseconds; the duration of the first order issued replaces it, and a moving average of the
   * observed durations (failed orders' included) follows. Only used for the
   * `expectedAt` of the in-flight cap, which takes the longer of it and the time the orders in
   * flight have gone without one ending or starting. Default `DEFAULT_TYPICAL_ORDER_MS`.
   */
  readonly typicalOrderMs?: number;
  /**
   * A safety net for a missed `withdraw`: a waiting key not asked about for this long after the
   * `expectedAt` it was last given (or after it was last asked, if later) is forgotten, so it holds
   * no place in line for ever. Milliseconds, positive; `Infinity` turns it off. Default
   * `DEFAULT_STALE_AFTER_MS`. A forgotten key that asks again joins the line anew.
   */
  readonly staleAfterMs?: number;
}

/** Figures for metrics (the gauges of observability/shared-metrics.ts read them). */
export type { OrderBudgetSnapshot };

/** Where a waiting entry is: in the shared line, parked by its registered domain or its hostname. */
type EntryState = 'active' | 'domain' | 'host' | 'gone';

interface Entry {
  readonly key: string;
  readonly tenant: string;
  readonly hostname: string;
  readonly registeredDomain: string;
  readonly kind: OrderKind;
  readonly kindRank: number;
  readonly queuedAtMs: number;
  /** Order of first requests (a counter): breaks ties of `queuedAtMs`, so a key never goes ahead of one already waiting with the same time. */
  readonly arrival: number;
  state: EntryState;
  /** When the caller was told to come back (or last came), ms: for `staleAfterMs`. */
  dueMs: number;
  /** The last answer it was given while waiting: repeated while it still holds (`stillHolds`). */
  told: OrderQueued | undefined;
}

/**
 * A place in the shared line. A tenant's requests of one kind form a stream; its i-th oldest active
 * request holds its i-th slot, so the slots (static keys) stay sorted while requests come and go.
 */
interface Slot {
  readonly kindRank: number;
  readonly round: number;
  readonly seq: number;
  readonly stream: Stream;
}

interface Stream {
  readonly id: string;
  /** Active entries, by queuedAt then first request. */
  readonly items: Entry[];
  /** Rounds strictly increasing; `slots[i]` belongs to `items[i]`. */
  readonly slots: Slot[];
  /** The round of the latest slot made: the next one comes after it. */
  lastRound: number;
  /** Orders of this stream in flight: it is kept (with its rounds) while any are. */
  inFlight: number;
}

interface DomainState {
  readonly certs: SlidingWindow;
  inFlight: number;
  /** Waiting entries not parked by their hostname, by kind, queuedAt, first request; a new array once empty. */
  line: Entry[];
  /** `line[0 .. active)` are in the shared line; the rest wait for this domain's budget. */
  active: number;
}

interface HostState {
  readonly failures: SlidingWindow;
  inFlight: number;
  /** Its waiting entries (few: usually one). */
  readonly waiting: Entry[];
}

interface Flight {
  readonly stream: string;
  readonly hostname: string;
  readonly registeredDomain: string;
  readonly admittedAtMs: number;
}

const KIND_RANK: Readonly<Record<OrderKind, number>> = { renewal: 0, 'first-issuance': 1 };

/** Weight of the newest observed order duration in the moving average. */
const DURATION_WEIGHT = 0.2;

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

/** Event times (ms) inside a sliding window, oldest first; older ones are dropped as the clock passes. */
class SlidingWindow {
  readonly #windowMs: number;
  /**
   * A window of one event holds an array of one (`[atMs]`): a push onto an empty array would
   * allocate room for 17 (152 bytes), kept for a week per registered domain (docs/performance.md).
   */
  #times: number[] = [];
  #head = 0;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  get size(): number {
    return this.#times.length - this.#head;
  }

  add(atMs: number): void {
    const times = this.#times;
    if (this.size === 0) {
      this.#times = [atMs];
      this.#head = 0;
      return;
    }
    if ((times.at(-1) ?? -Infinity) <= atMs) {
      times.push(atMs);
      return;
    }
    let lo = this.#head;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((times[mid] ?? Infinity) <= atMs) lo = mid + 1;
      else hi = mid;
    }
    times.splice(lo, 0, atMs);
  }

  /** The events in the window (nowMs - windowMs, nowMs]: older ones are forgotten. */
  count(nowMs: number): number {
    const cutoff = nowMs - this.#windowMs;
    const times = this.#times;
    while (this.#head < times.length && (times[this.#head] ?? Infinity) <= cutoff) this.#head++;
    if (this.#head === times.length && this.#head > 0) {
      this.#times = [];
      this.#head = 0;
    } else if (this.#head > 0 && this.#head * 2 >= times.length) {
      times.splice(0, this.#head);
      this.#head = 0;
    }
    return this.size;
  }

  /** The time of the i-th oldest event held (0-based), ms. */
  at(i: number): number | undefined {
    return i < 0 ? undefined : this.#times[this.#head + i];
  }
}

export class OrderBudget {
  readonly #limits: OrderBudgetLimits;
  /** The limits as the messages name them. */
  readonly #phrases: Readonly<Record<'account' | 'inFlight' | 'domain' | 'host', string>>;
  readonly #staleAfterMs: number;
  readonly #sweepEveryMs: number;
  /** `typicalOrderMs` until an order is issued, then the moving average of observed durations. */
  #orderMs: number;
  /** An order was issued: `#orderMs` started from an observed duration, no longer the assumed one. */
  #orderMsObserved = false;
  /**
   * Mean time (ms) from an order slot freed while the line waited for one to the next order
   * admitted: the caller's re-queue and a free worker. Counted in the in-flight estimate.
   */
  #turnaroundMs = 0;
  /** When slots were freed with the line waiting and the account window not full, oldest first (ms). */
  readonly #freedAtMs: number[] = [];
  /** When the orders in flight last changed (one admitted, settled or withdrawn), ms. */
  #flightsChangedAtMs = -Infinity;
  readonly #orders: SlidingWindow;
  readonly #domains = new Map<string, DomainState>();
  /**
   * Registered domains at rest with one certificate in their window (nothing waiting or in flight,
   * as nearly every domain is once issued): its time (ms), kept here for the window's week instead
   * of a `DomainState`: 324 -> 145 bytes per settled registered domain (a script settling 10,000,
   * heap after GC; docs/performance.md). `#domain` brings one back; the sweep forgets it when its
   * certificate leaves the window.
   */
  readonly #restingDomains = new Map<string, number>();
  readonly #hosts = new Map<string, HostState>();
  readonly #waiting = new Map<string, Entry>();
  /** First requests so far: the next entry's `arrival`. */
  #arrivals = 0;
  readonly #inFlight = new Map<string, Flight>();
  readonly #streams = new Map<string, Stream>();
  /** The shared line: the slots of every active entry, in admission order. */
  readonly #line: Slot[] = [];
  /** Per kind rank, the latest round admitted: where a stream that (re)joins starts. */
  readonly #rounds = [0, 0];
  #seq = 0;
  readonly #parkedDomains = new Set<string>();
  readonly #parkedHosts = new Set<string>();
  #wakeAtMs = Infinity;
  #nextSweepMs = -Infinity;
  #lastNowMs = -Infinity;
  readonly #kindCounts = [0, 0];
  readonly #stateCounts: Record<EntryState, number> = { active: 0, domain: 0, host: 0, gone: 0 };

  /**
   * @throws RangeError when a limit is not a positive integer, a window or `typicalOrderMs` not a
   * positive finite number of milliseconds, or `staleAfterMs` not positive.
   */
  constructor(options: OrderBudgetOptions = {}) {
    const given = options.limits ?? {};
    const defaults = LETS_ENCRYPT_ORDER_LIMITS;
    this.#limits = Object.freeze({
      accountOrders: checkWindow('accountOrders', given.accountOrders ?? defaults.accountOrders),
      certificatesPerRegisteredDomain: checkWindow(
        'certificatesPerRegisteredDomain',
        given.certificatesPerRegisteredDomain ?? defaults.certificatesPerRegisteredDomain,
      ),
      failedValidationsPerHostname: checkWindow(
        'failedValidationsPerHostname',
        given.failedValidationsPerHostname ?? defaults.failedValidationsPerHostname,
      ),
      maxInFlight: checkCount('maxInFlight', given.maxInFlight ?? defaults.maxInFlight),
    });
    this.#orderMs = options.typicalOrderMs ?? DEFAULT_TYPICAL_ORDER_MS;
    if (!Number.isFinite(this.#orderMs) || this.#orderMs <= 0) {
      throw new RangeError(
        `OrderBudget: typicalOrderMs must be a positive, finite number of milliseconds, got ${String(options.typicalOrderMs)}`,
      );
    }
    this.#staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS;
    if (!(this.#staleAfterMs > 0)) {
      throw new RangeError(
        `OrderBudget: staleAfterMs must be a positive number of milliseconds (Infinity for never), got ${String(options.staleAfterMs)}`,
      );
    }
    const l = this.#limits;
    this.#sweepEveryMs = Math.min(
      l.accountOrders.windowMs,
      l.certificatesPerRegisteredDomain.windowMs,
      l.failedValidationsPerHostname.windowMs,
      this.#staleAfterMs,
    );
    this.#orders = new SlidingWindow(l.accountOrders.windowMs);
    const { accountOrders: a, certificatesPerRegisteredDomain: d, failedValidationsPerHostname: h } = l;
    this.#phrases = {
      account: `the CA's order budget (${a.limit} new orders per ${formatDuration(a.windowMs)})`,
      inFlight: `an order slot (at most ${l.maxInFlight} orders in flight at once)`,
      domain: `(${d.limit} certificates per registered domain per ${formatDuration(d.windowMs)})`,
      host: `(${h.limit} failed validations per hostname per ${formatDuration(h.windowMs)})`,
    };
  }

  /** The limits in force (the defaults with the constructor's overrides). */
  get limits(): OrderBudgetLimits {
    return this.#limits;
  }

  /**
   * May `req.key` place its order now? Puts the key in line on its first call. Admitting counts the
   * order at once (see `OrderAdmitted`); asking again for a waiting key counts nothing and returns
   * the answer for the current state, or the same answer as last time while that still holds (same
   * limit, and either the turn expected within 5 s and its expected time not more than 5 s past, or
   * its expected time not passed and within 10 % of the wait left or a minute of the current
   * estimate, its place neither grown nor fallen to a tenth or to the front; `stillHolds`): a waiting
   * domain's status is not rewritten at every look; asking for a key admitted and not settled
   * returns `{ admitted: true, alreadyInFlight: true }` with the original `admittedAt`.
   *
   * @throws RangeError when `now` or (on a key's first call) `req.queuedAt` is not a valid Date, or
   * `req.kind` is unknown.
   */
  request(req: OrderRequest, now: Date): OrderDecision {
    const nowMs = this.#advance(now);
    const flight = this.#inFlight.get(req.key);
    if (flight) return { admitted: true, admittedAt: new Date(flight.admittedAtMs), alreadyInFlight: true };
    const entry = this.#waiting.get(req.key) ?? this.#enter(req, nowMs);
    const fresh = this.#decide(entry, nowMs);
    if (fresh.admitted) return fresh;
    const decision = entry.told !== undefined && stillHolds(entry.told, fresh, nowMs) ? entry.told : fresh;
    entry.told = decision;
    entry.dueMs = Math.max(nowMs, decision.expectedAt.getTime());
    return decision;
  }

  /**
   * Puts `req.key` in line without deciding anything (nothing when it is waiting or in flight
   * already): after a restart, enqueue every domain that needs an order before reconciling any, so
   * the line starts in its proper order rather than in the order of the first reconciles.
   *
   * @throws RangeError as `request`.
   */
  enqueue(req: OrderRequest, now: Date): void {
    const nowMs = this.#advance(now);
    if (!this.#inFlight.has(req.key) && !this.#waiting.has(req.key)) this.#enter(req, nowMs);
  }

  /**
   * The order admitted for `key` ended: frees its in-flight slot; `'valid'` (a certificate was
   * issued) counts a certificate against its registered domain, `'failed-validation'` (the CA found
   * the challenge invalid) a failed validation against its hostname, both at `now`; `'failed-other'`
   * counts neither. Nothing when `key` is not in flight.
   *
   * @throws RangeError when `now` is not a valid Date.
   */
  settled(key: string, outcome: OrderOutcome, now: Date): void {
    const nowMs = this.#advance(now);
    const flight = this.#inFlight.get(key);
    if (!flight) return;
    const durationMs = Math.max(0, nowMs - flight.admittedAtMs);
    // The assumed duration stands only until an order is issued: averaged in, a minute's guess
    // outweighed 0.3-s orders for their first ten or so, and every domain told its place then was
    // told again once the estimate came down (docs/performance.md, twelfth round). A failure is
    // averaged in, never taken alone: it may end in milliseconds (a refusal) or at a timeout.
    const replacesGuess = !this.#orderMsObserved && outcome === 'valid';
    this.#orderMs = replacesGuess
      ? durationMs
      : this.#orderMs * (1 - DURATION_WEIGHT) + durationMs * DURATION_WEIGHT;
    if (replacesGuess) this.#orderMsObserved = true;
    if (outcome === 'valid') this.#domain(flight.registeredDomain).certs.add(nowMs);
    if (outcome === 'failed-validation') this.#host(flight.hostname).failures.add(nowMs);
    this.#land(key, flight, nowMs);
  }

  /**
   * Forgets `key` (the domain was removed, or is no longer accepted, or no longer verified): drops it
   * from the line, or frees its in-flight slot (the order stays counted in the account window).
   * Nothing when unknown. Takes no clock: the limits are re-read at the latest `now` seen. Returns
   * true when it dropped or freed something.
   */
  withdraw(key: string): boolean {
    const nowMs = this.#lastNowMs;
    const entry = this.#waiting.get(key);
    if (entry) {
      this.#drop(entry, nowMs);
      return true;
    }
    const flight = this.#inFlight.get(key);
    if (flight) this.#land(key, flight, nowMs);
    return flight !== undefined;
  }

  /**
   * The waiting keys that `request` would admit now, in line order: re-queue them after `settled`
   * or `withdraw`, so the room freed is used without waiting for their `expectedAt`. A hint: of two
   * keys listed for one hostname whose failed-validation limit has room for one, the second is then
   * refused. O(number returned × log n).
   *
   * @throws RangeError when `now` is not a valid Date.
   */
  admissible(now: Date): string[] {
    const nowMs = this.#advance(now);
    const room = Math.min(this.#room(nowMs), this.#line.length);
    const keys: string[] = [];
    for (let i = 0; i < room; i++) {
      const slot = this.#line[i];
      const entry = slot ? slot.stream.items[lowerBound(slot.stream.slots, slot, bySlot)] : undefined;
      if (entry) keys.push(entry.key);
    }
    return keys;
  }

  /**
   * When waiting keys may next be admitted without any order settling: the moment the oldest order
   * of a full account window leaves it, or the oldest event of a parked registered domain or
   * hostname leaves its window. Undefined when nothing waits, or when only a settling order can make
   * room (the in-flight cap). Re-queue the keys of `admissible` then: a domain told a later
   * `expectedAt` (an estimate) would otherwise leave the room unused until that time.
   *
   * @throws RangeError when `now` is not a valid Date.
   */
  nextRoomAt(now: Date): Date | undefined {
    const nowMs = this.#advance(now);
    if (this.#line.length === 0 && this.#parkedDomains.size === 0 && this.#parkedHosts.size === 0) {
      return undefined;
    }
    let atMs = this.#wakeAtMs;
    const { limit, windowMs } = this.#limits.accountOrders;
    const count = this.#orders.count(nowMs);
    const oldestBlocking = count >= limit ? this.#orders.at(count - limit) : undefined;
    if (oldestBlocking !== undefined) atMs = Math.min(atMs, oldestBlocking + windowMs);
    return Number.isFinite(atMs) ? new Date(Math.max(atMs, nowMs)) : undefined;
  }

  /**
   * Seeds the account window with an order placed at `at` (e.g. after a restart, from the order
   * times recorded in status), so a restarted operator does not assume an empty budget. An order
   * older than the window is forgotten at the next call. Orders the budget admitted are counted
   * already: do not record them again.
   *
   * @throws RangeError when `at` is not a valid Date.
   */
  recordPastOrder(at: Date): void {
    this.#orders.add(validMs(at, 'at'));
  }

  /**
   * Seeds `registeredDomain`'s budget with a certificate issued at `at` (e.g. the notBefore of the
   * certificates stored for its domains), after a restart. One older than the window counts nothing.
   *
   * @throws RangeError when `at` is not a valid Date.
   */
  recordPastCertificate(registeredDomain: string, at: Date): void {
    const atMs = validMs(at, 'at');
    this.#domain(registeredDomain).certs.add(atMs);
    this.#refreshDomain(registeredDomain, this.#lastNowMs);
  }

  /**
   * Seeds `hostname`'s failed validations with one at `at`, after a restart (e.g. from the time of
   * the last failure recorded in status). One older than the window counts nothing.
   *
   * @throws RangeError when `at` is not a valid Date.
   */
  recordPastFailedValidation(hostname: string, at: Date): void {
    const atMs = validMs(at, 'at');
    this.#host(hostname).failures.add(atMs);
    this.#refreshHost(hostname, this.#lastNowMs);
  }

  /**
   * Figures for metrics at `now`.
   *
   * @throws RangeError when `now` is not a valid Date.
   */
  snapshot(now: Date): OrderBudgetSnapshot {
    const nowMs = this.#advance(now);
    return {
      ordersInWindow: this.#orders.count(nowMs),
      orderLimit: this.#limits.accountOrders.limit,
      orderWindowMs: this.#limits.accountOrders.windowMs,
      inFlight: this.#inFlight.size,
      maxInFlight: this.#limits.maxInFlight,
      waiting: { renewal: this.#kindCounts[0] ?? 0, firstIssuance: this.#kindCounts[1] ?? 0 },
      waitingForRegisteredDomain: this.#stateCounts.domain,
      waitingForFailedValidation: this.#stateCounts.host,
    };
  }

  /** Reads the clock; applies what the passing time changed (windows sliding, housekeeping). */
  #advance(now: Date): number {
    const nowMs = validMs(now, 'now');
    this.#lastNowMs = Math.max(this.#lastNowMs, nowMs);
    if (nowMs >= this.#wakeAtMs) this.#wake(nowMs);
    if (nowMs >= this.#nextSweepMs) this.#sweep(nowMs);
    return nowMs;
  }

  /** Room in the account window and under the in-flight cap, now. */
  #room(nowMs: number): number {
    const freeOrders = this.#limits.accountOrders.limit - this.#orders.count(nowMs);
    return Math.min(freeOrders, this.#limits.maxInFlight - this.#inFlight.size);
  }

  #enter(req: OrderRequest, nowMs: number): Entry {
    if (!Object.hasOwn(KIND_RANK, req.kind)) {
      throw new RangeError(
        `OrderBudget: kind must be 'renewal' or 'first-issuance', got ${JSON.stringify(req.kind)}`,
      );
    }
    const entry: Entry = {
      key: req.key,
      tenant: req.tenant,
      hostname: req.hostname,
      registeredDomain: req.registeredDomain,
      kind: req.kind,
      kindRank: KIND_RANK[req.kind],
      queuedAtMs: validMs(req.queuedAt, 'queuedAt'),
      arrival: this.#arrivals++,
      state: 'gone',
      dueMs: nowMs,
      told: undefined,
    };
    this.#waiting.set(entry.key, entry);
    this.#kindCounts[entry.kindRank] = (this.#kindCounts[entry.kindRank] ?? 0) + 1;
    this.#setState(entry, 'host');
    this.#host(entry.hostname).waiting.push(entry);
    this.#refreshHost(entry.hostname, nowMs);
    return entry;
  }

  #decide(entry: Entry, nowMs: number): OrderDecision {
    if (entry.state === 'host') return this.#hostAnswer(entry, nowMs);
    if (entry.state === 'domain') return this.#domainAnswer(entry, nowMs);
    return this.#sharedAnswer(entry, nowMs);
  }

  #sharedAnswer(entry: Entry, nowMs: number): OrderDecision {
    const position = this.#rank(entry) + 1;
    const { accountOrders, maxInFlight } = this.#limits;
    const freeOrders = accountOrders.limit - this.#orders.count(nowMs);
    const freeFlights = maxInFlight - this.#inFlight.size;
    if (position <= Math.min(freeOrders, freeFlights)) return this.#admit(entry, nowMs);
    const accountAt = slotTimeMs(position, accountOrders, this.#orders, 0, nowMs);
    const waveMs = Math.max(this.#orderMs, this.#stalledMs(nowMs));
    const flightAt =
      position <= freeFlights
        ? nowMs
        : nowMs + Math.ceil((position - freeFlights) / maxInFlight) * (waveMs + this.#turnaroundMs);
    const account = position > freeOrders && (position <= freeFlights || accountAt >= flightAt);
    const at = Math.max(accountAt, flightAt);
    if (account) return queued('AccountOrderBudget', position, at, this.#phrases.account);
    return queued('OrdersInFlightCap', position, at, this.#phrases.inFlight);
  }

  #domainAnswer(entry: Entry, nowMs: number): OrderQueued {
    const limit = this.#limits.certificatesPerRegisteredDomain;
    const domain = this.#domain(entry.registeredDomain);
    const index = Math.max(0, indexOf(domain.line, entry, byLine));
    const at = slotTimeMs(index + 1, limit, domain.certs, domain.inFlight, nowMs);
    const what = `the certificate budget of ${entry.registeredDomain} ${this.#phrases.domain}`;
    return queued('RegisteredDomainBudget', Math.max(1, index - domain.active + 1), at, what);
  }

  #hostAnswer(entry: Entry, nowMs: number): OrderQueued {
    const limit = this.#limits.failedValidationsPerHostname;
    const host = this.#host(entry.hostname);
    let position = 1;
    for (const other of host.waiting) if (byLine(other, entry) < 0) position++;
    const at = slotTimeMs(position, limit, host.failures, host.inFlight, nowMs);
    const what = `the failed-validation limit of ${entry.hostname} ${this.#phrases.host}`;
    return queued('FailedValidationLimit', position, at, what);
  }

  #admit(entry: Entry, nowMs: number): OrderAdmitted {
    const stream = this.#streams.get(streamId(entry));
    if (stream) stream.inFlight++;
    const slot = this.#leave(entry);
    if (slot) this.#rounds[slot.kindRank] = Math.max(this.#rounds[slot.kindRank] ?? 0, slot.round);
    const freedAtMs = this.#freedAtMs.shift();
    if (freedAtMs !== undefined) {
      this.#turnaroundMs =
        this.#turnaroundMs * (1 - DURATION_WEIGHT) + Math.max(0, nowMs - freedAtMs) * DURATION_WEIGHT;
    }
    this.#orders.add(nowMs);
    // A full account window paces the next orders, not the slots: no turnaround to measure then.
    if (this.#orders.count(nowMs) >= this.#limits.accountOrders.limit) this.#freedAtMs.length = 0;
    this.#domain(entry.registeredDomain).inFlight++;
    this.#host(entry.hostname).inFlight++;
    this.#flightsChangedAtMs = Math.max(this.#flightsChangedAtMs, nowMs);
    this.#inFlight.set(entry.key, {
      stream: streamId(entry),
      hostname: entry.hostname,
      registeredDomain: entry.registeredDomain,
      admittedAtMs: nowMs,
    });
    this.#refreshDomain(entry.registeredDomain, nowMs);
    this.#refreshHost(entry.hostname, nowMs);
    return { admitted: true, admittedAt: new Date(nowMs), alreadyInFlight: false };
  }

  /**
   * How long (ms) the orders in flight have gone without one ending or a new one admitted; 0 with
   * none in flight. When that is longer than the typical order, no order is about to free its slot
   * (a CA that hangs, or is down while acme-client retries its requests): a wave of the in-flight
   * estimate is then taken to last as long again, so a waiting domain is told a later time once,
   * instead of an early one that passes and is rewritten again and again (a stopped CA at 2,000
   * domains: 2,379 status writes in 40 s for 1,192 waiting, docs/performance.md 45).
   */
  #stalledMs(nowMs: number): number {
    if (this.#inFlight.size === 0) return 0;
    return Math.max(0, nowMs - this.#flightsChangedAtMs);
  }

  /** An order in flight ended (settled or withdrawn): frees its slot and its domain's and host's. */
  #land(key: string, flight: Flight, nowMs: number): void {
    this.#inFlight.delete(key);
    this.#flightsChangedAtMs = Math.max(this.#flightsChangedAtMs, nowMs);
    const accountRoom = this.#limits.accountOrders.limit - this.#orders.count(nowMs);
    if (this.#line.length > 0 && accountRoom > 0) {
      this.#freedAtMs.push(nowMs);
      if (this.#freedAtMs.length > this.#limits.maxInFlight) this.#freedAtMs.shift();
    }
    const stream = this.#streams.get(flight.stream);
    if (stream) {
      stream.inFlight--;
      this.#forgetIfIdle(stream);
    }
    this.#domain(flight.registeredDomain).inFlight--;
    this.#host(flight.hostname).inFlight--;
    this.#refreshDomain(flight.registeredDomain, nowMs);
    this.#refreshHost(flight.hostname, nowMs);
  }

  /** Takes a waiting entry out of every structure; returns its slot if it was in the shared line. */
  #leave(entry: Entry): Slot | undefined {
    this.#waiting.delete(entry.key);
    this.#kindCounts[entry.kindRank] = (this.#kindCounts[entry.kindRank] ?? 1) - 1;
    const waiting = this.#hosts.get(entry.hostname)?.waiting;
    const index = waiting ? waiting.indexOf(entry) : -1;
    if (waiting && index >= 0) waiting.splice(index, 1);
    const slot = entry.state === 'host' ? undefined : this.#removeFromDomainLine(entry);
    this.#setState(entry, 'gone');
    return slot;
  }

  #drop(entry: Entry, nowMs: number): void {
    this.#leave(entry);
    this.#refreshDomain(entry.registeredDomain, nowMs);
    this.#refreshHost(entry.hostname, nowMs);
  }

  #setState(entry: Entry, state: EntryState): void {
    this.#stateCounts[entry.state]--;
    this.#stateCounts[state]++;
    entry.state = state;
  }

  #domain(registeredDomain: string): DomainState {
    let domain = this.#domains.get(registeredDomain);
    if (!domain) {
      const certs = new SlidingWindow(this.#limits.certificatesPerRegisteredDomain.windowMs);
      const restingCertMs = this.#restingDomains.get(registeredDomain);
      if (restingCertMs !== undefined) {
        certs.add(restingCertMs);
        this.#restingDomains.delete(registeredDomain);
      }
      domain = { certs, inFlight: 0, line: [], active: 0 };
      this.#domains.set(registeredDomain, domain);
    }
    return domain;
  }

  #host(hostname: string): HostState {
    let host = this.#hosts.get(hostname);
    if (!host) {
      const failures = new SlidingWindow(this.#limits.failedValidationsPerHostname.windowMs);
      host = { failures, inFlight: 0, waiting: [] };
      this.#hosts.set(hostname, host);
    }
    return host;
  }

  #insertIntoDomainLine(entry: Entry, nowMs: number): void {
    const domain = this.#domain(entry.registeredDomain);
    const index = lowerBound(domain.line, entry, byLine);
    domain.line.splice(index, 0, entry);
    if (index < domain.active) {
      domain.active++;
      this.#activate(entry);
    } else {
      this.#setState(entry, 'domain');
    }
    this.#refreshDomain(entry.registeredDomain, nowMs);
  }

  /** Takes `entry` out of its domain's line (without refreshing the domain); returns its slot if active. */
  #removeFromDomainLine(entry: Entry): Slot | undefined {
    const domain = this.#domains.get(entry.registeredDomain);
    const index = domain ? indexOf(domain.line, entry, byLine) : -1;
    if (!domain || index < 0) return undefined;
    domain.line.splice(index, 1);
    // An emptied array keeps the room it grew to; the domain stays for its certificate window.
    if (domain.line.length === 0) domain.line = [];
    if (index >= domain.active) return undefined;
    domain.active--;
    return this.#deactivate(entry);
  }

  /**
   * Moves the boundary between the domain's entries in the shared line and those waiting for its
   * budget to where the budget now stands; forgets the domain once nothing refers to it.
   */
  #refreshDomain(registeredDomain: string, nowMs: number): void {
    const domain = this.#domains.get(registeredDomain);
    if (!domain) return;
    const { limit, windowMs } = this.#limits.certificatesPerRegisteredDomain;
    const room = limit - domain.certs.count(nowMs) - domain.inFlight;
    const target = Math.max(0, Math.min(room, domain.line.length));
    while (domain.active < target) {
      const entry = domain.line[domain.active++];
      if (entry) this.#activate(entry);
    }
    while (domain.active > target) {
      const entry = domain.line[--domain.active];
      if (entry) {
        this.#deactivate(entry);
        this.#setState(entry, 'domain');
      }
    }
    if (domain.active < domain.line.length) {
      this.#parkedDomains.add(registeredDomain);
      this.#wakeAt(domain.certs.at(0), windowMs);
    } else {
      this.#parkedDomains.delete(registeredDomain);
    }
    if (domain.line.length === 0 && domain.inFlight <= 0) {
      const certs = domain.certs.size;
      const onlyCertMs = domain.certs.at(0);
      if (certs === 0) this.#domains.delete(registeredDomain);
      else if (certs === 1 && onlyCertMs !== undefined) {
        this.#domains.delete(registeredDomain);
        this.#restingDomains.set(registeredDomain, onlyCertMs);
      }
    }
  }

  /**
   * Parks the hostname's waiting entries while its failed validations (and its orders in flight)
   * reach the limit, puts them back in their domains' lines once they do not; forgets the hostname
   * once nothing refers to it.
   */
  #refreshHost(hostname: string, nowMs: number): void {
    const host = this.#hosts.get(hostname);
    if (!host) return;
    const { limit, windowMs } = this.#limits.failedValidationsPerHostname;
    const blocked = host.failures.count(nowMs) + host.inFlight >= limit;
    for (const entry of host.waiting) {
      if (blocked && entry.state !== 'host') {
        this.#removeFromDomainLine(entry);
        this.#setState(entry, 'host');
        this.#refreshDomain(entry.registeredDomain, nowMs);
      } else if (!blocked && entry.state === 'host') {
        this.#insertIntoDomainLine(entry, nowMs);
      }
    }
    if (blocked && host.waiting.length > 0) {
      this.#parkedHosts.add(hostname);
      this.#wakeAt(host.failures.at(0), windowMs);
    } else {
      this.#parkedHosts.delete(hostname);
    }
    if (host.waiting.length === 0 && host.inFlight <= 0 && host.failures.size === 0) {
      this.#hosts.delete(hostname);
    }
  }

  /** Wake up when the event at `oldestMs` leaves its window (a parked group may then move). */
  #wakeAt(oldestMs: number | undefined, windowMs: number): void {
    if (oldestMs !== undefined) this.#wakeAtMs = Math.min(this.#wakeAtMs, oldestMs + windowMs);
  }

  /** Some event held by a parked domain or hostname has left its window: refresh them all. */
  #wake(nowMs: number): void {
    this.#wakeAtMs = Infinity;
    for (const hostname of [...this.#parkedHosts]) this.#refreshHost(hostname, nowMs);
    for (const registeredDomain of [...this.#parkedDomains]) this.#refreshDomain(registeredDomain, nowMs);
  }

  /**
   * Housekeeping, once per shortest window: forgets stale waiting keys (`staleAfterMs`) and the
   * domains and hostnames whose events have all left their windows. O(waiting keys + groups).
   */
  #sweep(nowMs: number): void {
    this.#nextSweepMs = nowMs + this.#sweepEveryMs;
    const stale = [...this.#waiting.values()].filter((e) => nowMs - e.dueMs > this.#staleAfterMs);
    for (const entry of stale) this.#drop(entry, nowMs);
    for (const registeredDomain of [...this.#domains.keys()]) this.#refreshDomain(registeredDomain, nowMs);
    const cutoffMs = nowMs - this.#limits.certificatesPerRegisteredDomain.windowMs;
    for (const [registeredDomain, certMs] of this.#restingDomains) {
      if (certMs <= cutoffMs) this.#restingDomains.delete(registeredDomain);
    }
    for (const hostname of [...this.#hosts.keys()]) this.#refreshHost(hostname, nowMs);
  }

  /** Puts `entry` in the shared line: in its stream by queuedAt, with a new slot at the stream's end. */
  #activate(entry: Entry): void {
    const id = streamId(entry);
    let stream = this.#streams.get(id);
    if (!stream) {
      stream = { id, items: [], slots: [], lastRound: -1, inFlight: 0 };
      this.#streams.set(id, stream);
    }
    stream.items.splice(lowerBound(stream.items, entry, byStream), 0, entry);
    const round = Math.max(stream.lastRound + 1, this.#rounds[entry.kindRank] ?? 0);
    stream.lastRound = round;
    const slot: Slot = { kindRank: entry.kindRank, round, seq: this.#seq++, stream };
    stream.slots.push(slot);
    this.#line.splice(lowerBound(this.#line, slot, bySlot), 0, slot);
    this.#setState(entry, 'active');
  }

  /** Takes `entry` out of the shared line (state unchanged); returns the slot it held. */
  #deactivate(entry: Entry): Slot | undefined {
    const stream = this.#streams.get(streamId(entry));
    const index = stream ? indexOf(stream.items, entry, byStream) : -1;
    if (!stream || index < 0) return undefined;
    stream.items.splice(index, 1);
    const [slot] = stream.slots.splice(index, 1);
    const at = slot ? indexOf(this.#line, slot, bySlot) : -1;
    if (at >= 0) this.#line.splice(at, 1);
    this.#forgetIfIdle(stream);
    return slot;
  }

  #forgetIfIdle(stream: Stream): void {
    if (stream.items.length === 0 && stream.inFlight <= 0) this.#streams.delete(stream.id);
  }

  /** 0-based place of an active entry in the shared line. */
  #rank(entry: Entry): number {
    const stream = this.#streams.get(streamId(entry));
    const slot = stream?.slots[indexOf(stream.items, entry, byStream)];
    return slot ? lowerBound(this.#line, slot, bySlot) : this.#line.length;
  }
}

function streamId(entry: Entry): string {
  return `${entry.kindRank}:${entry.tenant}`;
}

/** A domain's or hostname's line: renewals first, then by queuedAt, then in order of first request. */
function byLine(a: Entry, b: Entry): number {
  return a.kindRank - b.kindRank || a.queuedAtMs - b.queuedAtMs || a.arrival - b.arrival;
}

/** Within a tenant's stream: by queuedAt, then in order of first request. */
function byStream(a: Entry, b: Entry): number {
  return a.queuedAtMs - b.queuedAtMs || a.arrival - b.arrival;
}

/** The shared line: renewals first, then round by round, then in the order the slots were made. */
function bySlot(a: Slot, b: Slot): number {
  return a.kindRank - b.kindRank || a.round - b.round || a.seq - b.seq;
}

/** The first index whose item is not before `probe`. */
function lowerBound<T>(items: readonly T[], probe: T, compare: (a: T, b: T) => number): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compare(items[mid] as T, probe) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The index of `item` (by identity) in sorted `items`, or -1. */
function indexOf<T>(items: readonly T[], item: T, compare: (a: T, b: T) => number): number {
  const index = lowerBound(items, item, compare);
  return items[index] === item ? index : -1;
}

/**
 * When the `position`-th request (1-based) in line for a windowed limit gets room, ms. Room comes
 * now while the window has some, then as each event held leaves the window (events not in the
 * window yet, `extra`, such as orders in flight, are assumed to enter it now); each admission in
 * turn enters the window and leaves it `windowMs` later, so the times repeat one window later for
 * every `limit` positions.
 */
function slotTimeMs(
  position: number,
  { limit, windowMs }: WindowLimit,
  window: SlidingWindow,
  extra: number,
  nowMs: number,
): number {
  const held = window.count(nowMs);
  const free = limit - held - extra;
  const index = Math.max(0, position - 1);
  const cycle = Math.floor(index / limit);
  const place = index % limit;
  let baseMs = nowMs;
  if (place >= free) {
    const event = place - free;
    baseMs = event < held ? (window.at(event) ?? nowMs) + windowMs : nowMs + windowMs;
  }
  return Math.max(nowMs, baseMs + cycle * windowMs);
}

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
function stillHolds(told: OrderQueued, fresh: OrderQueued, nowMs: number): boolean {
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

function queued(reason: OrderQueueReason, position: number, atMs: number, what: string): OrderQueued {
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

const UNITS: readonly (readonly [number, string])[] = [
  [DAY_MS, 'day'],
  [HOUR_MS, 'hour'],
  [MINUTE_MS, 'minute'],
  [SECOND_MS, 'second'],
  [1, 'millisecond'],
];

/** "3 hours", "7 days", "hour" (for "per hour"): the largest unit that divides `ms`. */
function formatDuration(ms: number): string {
  for (const [size, name] of UNITS) {
    if (ms >= size && ms % size === 0) {
      const n = ms / size;
      return n === 1 ? name : `${n} ${name}s`;
    }
  }
  return `${ms} milliseconds`;
}

function validMs(date: Date, name: string): number {
  const ms = date instanceof Date ? date.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw new RangeError(`OrderBudget: ${name} must be a valid Date`);
  return ms;
}

function checkCount(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`OrderBudget: ${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

function checkWindow(name: string, value: WindowLimit): WindowLimit {
  checkCount(`${name}.limit`, value.limit);
  if (!Number.isFinite(value.windowMs) || value.windowMs <= 0) {
    throw new RangeError(
      `OrderBudget: ${name}.windowMs must be a positive, finite number of milliseconds, got ${String(value.windowMs)}`,
    );
  }
  return Object.freeze({ limit: value.limit, windowMs: value.windowMs });
}
