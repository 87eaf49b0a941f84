/**
 * The operator's metrics that live outside the reconcile: ACME requests, leader election, the ACME
 * order budget and the work queues. Process-wide, like the state they describe (acme-client has one
 * HTTP client per process; the elector, the order budget and the queues are one each per process):
 * the parts record into these metrics, or register themselves in a `LiveSet` that the gauges read
 * at each scrape, and `createControllerMetrics` adds them to its registry. Nothing is read between
 * scrapes.
 */
import { Counter, Gauge, Histogram, type Metric, type Registry } from 'prom-client';

/**
 * Objects alive now, held weakly: one that is garbage-collected leaves on its own, so a part that
 * is never stopped (a test's) holds nothing. Iteration order is insertion order.
 */
export class LiveSet<T extends object> {
  readonly #refs = new Set<WeakRef<T>>();
  readonly #byTarget = new WeakMap<T, WeakRef<T>>();

  add(value: T): void {
    if (this.#byTarget.has(value)) return;
    const ref = new WeakRef(value);
    this.#byTarget.set(value, ref);
    this.#refs.add(ref);
  }

  delete(value: T): void {
    const ref = this.#byTarget.get(value);
    if (ref === undefined) return;
    this.#refs.delete(ref);
    this.#byTarget.delete(value);
  }

  /** The members alive now, oldest first. */
  values(): T[] {
    const alive: T[] = [];
    for (const ref of this.#refs) {
      const value = ref.deref();
      if (value === undefined) this.#refs.delete(ref);
      else alive.push(value);
    }
    return alive;
  }
}

/** What the leader gauge reads of a leader elector. */
export interface LeaderElectionView {
  /** The Lease's name. */
  readonly leaseName: string;
  readonly leading: boolean;
}

/** Figures of an ACME account's order budget (src/acme/order-budget.ts `OrderQueue.snapshot`), for the gauges below. */
export interface OrderBudgetSnapshot {
  /** Orders counted in the account window now. */
  readonly ordersInWindow: number;
  readonly orderLimit: number;
  readonly orderWindowMs: number;
  /** Orders admitted and not settled. */
  readonly inFlight: number;
  readonly maxInFlight: number;
  /** Waiting keys by kind, for any reason. */
  readonly waiting: { readonly renewal: number; readonly firstIssuance: number };
  /** Of the waiting keys, those held back by their own registered domain's budget. */
  readonly waitingForRegisteredDomain: number;
  /** Of the waiting keys, those held back by their own hostname's failed-validation limit. */
  readonly waitingForFailedValidation: number;
}

/** What the order-budget gauges read: one ACME issuer's budget. */
export interface OrderBudgetView {
  /** The issuer's name (`--acme-issuers`), the gauges' `ca` label; undefined: reported as `""`. */
  readonly ca?: string | undefined;
  snapshot(now: Date): OrderBudgetSnapshot;
}

/** What the queue-depth gauge reads of a work queue. */
export interface WorkQueueView {
  /** The controller the queue feeds; `''` for a queue nobody named (reported without the label). */
  readonly name: string;
  readonly lengthByPriority: Readonly<Record<'high' | 'normal' | 'low', number>>;
}

/** Leader electors running in this process (`LeaderElector.run` until `stop`). */
export const leaderElectors = new LiveSet<LeaderElectionView>();
/**
 * Order budgets in use in this process (`OrderQueue`, one per ACME issuer, until `stop`); each is
 * reported under its `ca`, the newest when two share one.
 */
export const orderBudgets = new LiveSet<OrderBudgetView>();
/** Work queues in this process (until `shutDown`). */
export const workQueues = new LiveSet<WorkQueueView>();

/** Each issuer's budget now, by `ca` (the newest budget of a name wins: a test's leftover loses). */
function currentBudgets(): Map<string, OrderBudgetSnapshot> {
  const now = new Date();
  const byCa = new Map<string, OrderBudgetSnapshot>();
  for (const view of orderBudgets.values()) byCa.set(view.ca ?? '', view.snapshot(now));
  return byCa;
}

/** A gauge by `ca` read from each issuer's order budget at each scrape. */
function budgetGauge(name: string, help: string, read: (s: OrderBudgetSnapshot) => number): Gauge<'ca'> {
  return new Gauge<'ca'>({
    name,
    help,
    labelNames: ['ca'],
    registers: [],
    collect(this: Gauge<'ca'>) {
      this.reset();
      for (const [ca, snapshot] of currentBudgets()) this.set({ ca }, read(snapshot));
    },
  });
}

const PRIORITIES = ['high', 'normal', 'low'] as const;

/**
 * The metrics of the ACME issuers (src/acme/issuer-set.ts), by `ca`: the configured issuer names
 * (`--acme-issuers`), so a bounded set.
 */
export const issuerMetrics = {
  ordersTotal: new Counter<'ca' | 'result'>({
    name: 'portico_acme_issuer_orders_total',
    help: 'ACME orders by the configured issuer they went to (ca) and how they ended: valid, ca-failure (5xx, no answer, unreachable, account or binding refused), rate-limited, not-the-ca (validation, CAA, cancelled).',
    labelNames: ['ca', 'result'],
    registers: [],
  }),
  passedOver: new Gauge<'ca'>({
    name: 'portico_acme_issuer_passed_over',
    help: 'ACME issuer failover: 1 while the configured issuer (ca) is passed over after failing orders (new orders go to the next issuer in order), else 0.',
    labelNames: ['ca'],
    registers: [],
  }),
};

/** The metrics of this module, one set per process. */
export const sharedMetrics = {
  ...issuerMetrics,
  acmeRequestsTotal: new Counter<'endpoint' | 'status'>({
    name: 'portico_acme_requests_total',
    help: 'Requests to the ACME CA by endpoint (the directory resource or CA-created resource the URL belongs to) and status (the HTTP status code, or timeout, cancelled, error when there was no answer).',
    labelNames: ['endpoint', 'status'],
    registers: [],
  }),
  acmeRequestDuration: new Histogram<'endpoint'>({
    name: 'portico_acme_request_duration_seconds',
    help: 'Time from sending a request to the ACME CA to its whole answer (or its failure), seconds, by endpoint.',
    labelNames: ['endpoint'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [],
  }),
  leaderElectionLeading: new Gauge<'lease'>({
    name: 'portico_leader_election_leading',
    help: 'Leader election: 1 while this process holds the Lease (and reconciles), else 0; absent when leader election is off.',
    labelNames: ['lease'],
    registers: [],
    collect(this: Gauge<'lease'>) {
      this.reset();
      const byLease = new Map<string, number>();
      for (const e of leaderElectors.values())
        byLease.set(e.leaseName, Math.max(byLease.get(e.leaseName) ?? 0, e.leading ? 1 : 0));
      for (const [lease, value] of byLease) this.set({ lease }, value);
    },
  }),
  orderBudgetUsed: budgetGauge(
    'portico_acme_order_budget_used',
    "New orders counted in an ACME issuer's (ca) account order window now (admitted within the last portico_acme_order_budget_window_seconds).",
    (s) => s.ordersInWindow,
  ),
  orderBudgetLimit: budgetGauge(
    'portico_acme_order_budget_limit',
    "New orders an ACME issuer's (ca) account may place in one order window (its orderBudget.orders, --acme-orders-per-window).",
    (s) => s.orderLimit,
  ),
  orderBudgetWindow: budgetGauge(
    'portico_acme_order_budget_window_seconds',
    "Length of an ACME issuer's (ca) sliding order window, seconds.",
    (s) => s.orderWindowMs / 1000,
  ),
  ordersInFlight: budgetGauge(
    'portico_acme_orders_in_flight',
    "ACME orders admitted by an issuer's (ca) order budget and not yet settled.",
    (s) => s.inFlight,
  ),
  ordersInFlightLimit: budgetGauge(
    'portico_acme_orders_in_flight_limit',
    'ACME orders allowed in flight at once, per issuer (ca).',
    (s) => s.maxInFlight,
  ),
  ordersWaiting: new Gauge<'ca' | 'kind'>({
    name: 'portico_acme_orders_waiting',
    help: "Domains waiting for an ACME issuer's order budget (ca) before placing an order, by kind (renewal, first_issuance).",
    labelNames: ['ca', 'kind'],
    registers: [],
    collect(this: Gauge<'ca' | 'kind'>) {
      this.reset();
      for (const [ca, snapshot] of currentBudgets()) {
        this.set({ ca, kind: 'renewal' }, snapshot.waiting.renewal);
        this.set({ ca, kind: 'first_issuance' }, snapshot.waiting.firstIssuance);
      }
    },
  }),
  ordersHeldBack: new Gauge<'ca' | 'limit'>({
    name: 'portico_acme_orders_held_back',
    help: "Of the domains waiting for an issuer's budget (ca), those held back by a limit of their own (registered_domain: their registered domain's certificate budget; failed_validation: their hostname's failed-validation limit).",
    labelNames: ['ca', 'limit'],
    registers: [],
    collect(this: Gauge<'ca' | 'limit'>) {
      this.reset();
      for (const [ca, snapshot] of currentBudgets()) {
        this.set({ ca, limit: 'registered_domain' }, snapshot.waitingForRegisteredDomain);
        this.set({ ca, limit: 'failed_validation' }, snapshot.waitingForFailedValidation);
      }
    },
  }),
  workQueueDepthByPriority: new Gauge<'controller' | 'priority'>({
    name: 'portico_workqueue_depth_by_priority',
    help: 'Keys waiting in the work queues now, by controller and priority (high, normal, low); keys in process or on a timer not counted.',
    labelNames: ['controller', 'priority'],
    registers: [],
    collect(this: Gauge<'controller' | 'priority'>) {
      this.reset();
      for (const queue of workQueues.values()) {
        const depth = queue.lengthByPriority;
        for (const priority of PRIORITIES) this.inc({ controller: queue.name, priority }, depth[priority]);
      }
    },
  }),
  workQueueDuration: new Histogram<'controller' | 'priority'>({
    name: 'portico_workqueue_queue_duration_seconds',
    help: 'Time a key waited in the work queue before a worker took it, seconds, by controller and the priority it was taken at.',
    labelNames: ['controller', 'priority'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
    registers: [],
  }),
};

/**
 * Records one ACME request (src/acme/request-metrics.ts `AcmeRequestRecorder`).
 *
 * @param endpoint the resource asked for, one of src/acme/request-metrics.ts `ACME_ENDPOINTS`
 */
export function recordAcmeRequest(endpoint: string, status: string, seconds: number): void {
  sharedMetrics.acmeRequestsTotal.inc({ endpoint, status });
  sharedMetrics.acmeRequestDuration.observe({ endpoint }, seconds);
}

/** Adds every metric of this module to `registry` (the operator's). */
export function registerSharedMetrics(registry: Registry): void {
  for (const metric of Object.values(sharedMetrics) as Metric[]) registry.registerMetric(metric);
}
