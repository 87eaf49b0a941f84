import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { OrderQueue } from '../acme/order-queue.js';
import { WorkQueue } from '../kube/work-queue.js';
import { LiveSet, leaderElectors, registerSharedMetrics, type LeaderElectionView } from './shared-metrics.js';

/** The value of each series of `name` in `registry`'s exposition, keyed by its label text. */
async function series(registry: Registry, name: string): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    const match = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match) found.set(match[1] ?? '', Number(match[2]));
  }
  return found;
}

describe('LiveSet', () => {
  it('lists members until they are deleted, once each', () => {
    const set = new LiveSet<{ n: number }>();
    const a = { n: 1 };
    const b = { n: 2 };
    set.add(a);
    set.add(b);
    set.add(a);
    expect(set.values()).toEqual([a, b]);
    set.delete(a);
    expect(set.values()).toEqual([b]);
  });
});

describe('shared metrics', () => {
  const stops: (() => void)[] = [];
  afterEach(() => {
    for (const stop of stops.splice(0)) stop();
  });

  it("reports each issuer's order budget under its ca: orders in the window against the limit, in flight, waiting", async () => {
    const registry = new Registry();
    registerSharedMetrics(registry);
    const t0 = new Date();
    const first = new OrderQueue(
      { ca: 'first', limits: { accountOrders: { limit: 2, windowMs: 3_600_000 }, maxInFlight: 1 } },
      () => undefined,
    );
    const second = new OrderQueue(
      { ca: 'second', limits: { accountOrders: { limit: 50, windowMs: 600_000 }, maxInFlight: 5 } },
      () => undefined,
    );
    stops.push(() => {
      first.stop();
      second.stop();
    });
    const request = (orders: OrderQueue, key: string, kind: 'renewal' | 'first-issuance'): void => {
      orders.request(
        { key, tenant: 'shop', hostname: `${key}.test`, registeredDomain: `${key}.test`, kind, queuedAt: t0 },
        t0,
      );
    };
    request(first, 'a', 'first-issuance');
    request(first, 'b', 'renewal');
    request(first, 'c', 'first-issuance');
    request(second, 'd', 'first-issuance');
    request(second, 'e', 'first-issuance');
    const byCa = (first: number, second: number) =>
      new Map([
        ['{ca="first"}', first],
        ['{ca="second"}', second],
      ]);
    expect(await series(registry, 'portico_acme_order_budget_used')).toEqual(byCa(1, 2));
    expect(await series(registry, 'portico_acme_order_budget_limit')).toEqual(byCa(2, 50));
    expect(await series(registry, 'portico_acme_order_budget_window_seconds')).toEqual(byCa(3600, 600));
    expect(await series(registry, 'portico_acme_orders_in_flight')).toEqual(byCa(1, 2));
    expect(await series(registry, 'portico_acme_orders_in_flight_limit')).toEqual(byCa(1, 5));
    expect(await series(registry, 'portico_acme_orders_waiting')).toEqual(
      new Map([
        ['{ca="first",kind="renewal"}', 1],
        ['{ca="first",kind="first_issuance"}', 1],
        ['{ca="second",kind="renewal"}', 0],
        ['{ca="second",kind="first_issuance"}', 0],
      ]),
    );
    // A stopped budget is no longer reported; with none in use the gauges have no series.
    first.stop();
    expect(await series(registry, 'portico_acme_order_budget_used')).toEqual(new Map([['{ca="second"}', 2]]));
    second.stop();
    expect(await series(registry, 'portico_acme_order_budget_used')).toEqual(new Map());
    expect(await series(registry, 'portico_acme_orders_waiting')).toEqual(new Map());
  });

  it('reports each work queue by controller and priority until it shuts down', async () => {
    const registry = new Registry();
    registerSharedMetrics(registry);
    const queue = new WorkQueue(undefined, { name: 'unit-test-queue' });
    stops.push(() => {
      queue.shutDown();
    });
    queue.add('a/1');
    queue.add('a/2');
    queue.addHighPriority('b/1');
    queue.addLowPriority('c/1');
    const depth = await series(registry, 'portico_workqueue_depth_by_priority');
    expect(depth.get('{controller="unit-test-queue",priority="high"}')).toBe(1);
    expect(depth.get('{controller="unit-test-queue",priority="normal"}')).toBe(2);
    expect(depth.get('{controller="unit-test-queue",priority="low"}')).toBe(1);
    await queue.get();
    const waited = await series(registry, 'portico_workqueue_queue_duration_seconds_count');
    expect(waited.get('{controller="unit-test-queue",priority="high"}')).toBe(1);
    queue.shutDown();
    const after = await series(registry, 'portico_workqueue_depth_by_priority');
    expect([...after.keys()].some((labels) => labels.includes('unit-test-queue'))).toBe(false);
  });

  it('reports 1 for a lease any elector of this process holds, 0 for one none holds', async () => {
    const registry = new Registry();
    registerSharedMetrics(registry);
    const held: LeaderElectionView = { leaseName: 'unit-a', leading: true };
    const notHeld: LeaderElectionView = { leaseName: 'unit-a', leading: false };
    const other: LeaderElectionView = { leaseName: 'unit-b', leading: false };
    for (const e of [held, notHeld, other]) {
      leaderElectors.add(e);
      stops.push(() => {
        leaderElectors.delete(e);
      });
    }
    const leading = await series(registry, 'portico_leader_election_leading');
    expect(leading.get('{lease="unit-a"}')).toBe(1);
    expect(leading.get('{lease="unit-b"}')).toBe(0);
  });
});
