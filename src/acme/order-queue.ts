/**
 * The ACME order budget (order-budget.ts) with its clock: the pure budget says who may order and
 * when room comes; this wakes the waiting domains when it does. After an order settles, the
 * domains whose turn has come are re-queued at once; when the budget's account window (or a parked
 * registered domain or hostname) frees room later, one timer re-queues them then, so room is never
 * left unused until a domain's estimated `expectedAt`.
 */
import { OrderBudget, type OrderBudgetOptions } from './order-budget.js';
import type { OrderDecision, OrderOutcome, OrderRequest } from './order-decision.js';
import { MAX_TIMER_MS } from '../kube/work-queue.js';
import { orderBudgets } from '../observability/shared-metrics.js';

export class OrderQueue {
  readonly budget: OrderBudget;
  /** The ACME issuer's name, the `ca` label of the order-budget gauges; undefined: `""`. */
  readonly ca: string | undefined;
  readonly #requeue: (key: string) => void;
  readonly #now: () => Date;
  #timer: NodeJS.Timeout | undefined;
  #timerAtMs = Infinity;
  #stopped = false;

  /**
   * @param requeue queues a domain's key for a reconcile (its turn has come)
   * @param now the clock (tests pass their own)
   */
  constructor(
    options: OrderBudgetOptions & { readonly ca?: string },
    requeue: (key: string) => void,
    now: () => Date = () => new Date(),
  ) {
    this.budget = new OrderBudget(options);
    this.ca = options.ca;
    this.#requeue = requeue;
    this.#now = now;
    // The operator's order-budget gauges (portico_acme_order_budget_*, portico_acme_orders_*) read
    // this budget at each scrape, under its `ca`, until `stop`.
    orderBudgets.add(this);
  }

  /** The budget's figures for the gauges (`OrderBudget.snapshot`). */
  snapshot(now: Date): ReturnType<OrderBudget['snapshot']> {
    return this.budget.snapshot(now);
  }

  /** `OrderBudget.request`; a domain told to wait is woken when room comes. */
  request(req: OrderRequest, now: Date): OrderDecision {
    const decision = this.budget.request(req, now);
    if (!decision.admitted) this.#schedule(now);
    return decision;
  }

  /** `OrderBudget.settled`, then re-queues the domains whose turn came. */
  settled(key: string, outcome: OrderOutcome, now: Date): void {
    this.budget.settled(key, outcome, now);
    this.#wake(now);
  }

  /** `OrderBudget.withdraw`, then, if it dropped or freed something, re-queues the domains whose turn came. */
  withdraw(key: string): void {
    if (this.budget.withdraw(key)) this.#wake(this.#now());
  }

  /** Clears the timer; nothing is re-queued afterwards, and the budget is no longer reported. */
  stop(): void {
    this.#stopped = true;
    orderBudgets.delete(this);
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #wake(now: Date): void {
    if (this.#stopped) return;
    for (const key of this.budget.admissible(now)) this.#requeue(key);
    this.#schedule(now);
  }

  /** One timer, at the earliest moment room comes; a later request never postpones it. */
  #schedule(now: Date): void {
    if (this.#stopped) return;
    const at = this.budget.nextRoomAt(now);
    if (at === undefined) return;
    const atMs = at.getTime();
    if (this.#timer !== undefined && this.#timerAtMs <= atMs) return;
    clearTimeout(this.#timer);
    this.#timerAtMs = atMs;
    // A few milliseconds late, so the order that frees the room has left the window by then.
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAtMs = Infinity;
        this.#wake(this.#now());
      },
      Math.min(MAX_TIMER_MS, Math.max(0, atMs - now.getTime()) + 5),
    );
    this.#timer.unref();
  }
}
