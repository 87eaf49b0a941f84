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
 * The parts: order-decision.ts (what is asked and answered, and when an earlier answer stands),
 * order-limits.ts (the limits, their defaults and the window arithmetic), order-line.ts (the shared
 * line and its turns); this file keeps the account's counts and parks requests held back by their
 * registered domain or hostname.
 *
 * Cost, for n waiting keys: `request`, `enqueue`, `settled` and `withdraw` take O(log n)
 * comparisons plus a few array splices (O(n) memory moves, microseconds at 10,000 keys); a position
 * is a binary search, never a walk of the line. Housekeeping (stale keys, empty windows) walks
 * everything once per shortest window. Memory: one entry per waiting or in-flight key, plus the
 * events still inside their windows; older events are forgotten as the clock passes.
 */
import type { OrderBudgetSnapshot } from '../observability/shared-metrics.js';
import {
  queued,
  stillHolds,
  type OrderAdmitted,
  type OrderDecision,
  type OrderKind,
  type OrderOutcome,
  type OrderQueued,
  type OrderRequest,
} from './order-decision.js';
import {
  DEFAULT_STALE_AFTER_MS,
  DEFAULT_TYPICAL_ORDER_MS,
  LETS_ENCRYPT_ORDER_LIMITS,
  SlidingWindow,
  checkCount,
  checkWindow,
  formatDuration,
  slotTimeMs,
  validMs,
  type OrderBudgetLimits,
} from './order-limits.js';
import {
  OrderLine,
  byLine,
  indexOf,
  lowerBound,
  type Entry,
  type EntryState,
  type Slot,
} from './order-line.js';

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
  /** The shared line: every active entry, in admission order (order-line.ts). */
  readonly #line = new OrderLine();
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
      const key = this.#line.keyAt(i);
      if (key !== undefined) keys.push(key);
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
    const position = this.#line.rank(entry) + 1;
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
    const stream = this.#line.flightStarted(entry);
    const slot = this.#leave(entry);
    if (slot) this.#line.roundReached(slot);
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
      stream,
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
    this.#line.flightEnded(flight.stream);
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
    return this.#line.remove(entry);
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
        this.#line.remove(entry);
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

  /** Puts `entry` in the shared line. */
  #activate(entry: Entry): void {
    this.#line.add(entry);
    this.#setState(entry, 'active');
  }
}
