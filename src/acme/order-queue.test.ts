import { afterEach, describe, expect, it, vi } from 'vitest';
import type { OrderRequest } from './order-decision.js';
import { OrderQueue } from './order-queue.js';

const MINUTE = 60_000;

function req(key: string): OrderRequest {
  const [tenant = 'ns', name = key] = key.split('/');
  return {
    key,
    tenant,
    hostname: `www.${name}.${tenant}.test`,
    registeredDomain: `${name}.${tenant}.test`,
    kind: 'first-issuance',
    queuedAt: new Date(),
  };
}

/** A queue with one order slot and room in the account window; `requeued` lists the keys it woke. */
function oneSlot(): { orders: OrderQueue; requeued: string[] } {
  const requeued: string[] = [];
  const orders = new OrderQueue(
    { limits: { accountOrders: { limit: 100, windowMs: MINUTE }, maxInFlight: 1 } },
    (key) => requeued.push(key),
  );
  return { orders, requeued };
}

describe('OrderQueue', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('re-queues a waiting domain when the account window frees room, not at its estimated time', () => {
    vi.useFakeTimers({ now: new Date('2026-11-25T10:00:00Z') });
    const requeued: string[] = [];
    const orders = new OrderQueue(
      { limits: { accountOrders: { limit: 1, windowMs: MINUTE }, maxInFlight: 5 } },
      (key) => requeued.push(key),
    );
    expect(orders.request(req('a/0'), new Date()).admitted).toBe(true);
    orders.settled('a/0', 'valid', new Date()); // the window is still full: nobody's turn yet
    expect(requeued).toEqual([]);
    const waiting = orders.request(req('b/0'), new Date());
    expect(waiting.admitted).toBe(false);
    vi.advanceTimersByTime(MINUTE - 1_000);
    expect(requeued).toEqual([]);
    vi.advanceTimersByTime(1_010);
    expect(requeued).toEqual(['b/0']);
    expect(orders.request(req('b/0'), new Date()).admitted).toBe(true);
    orders.stop();
  });

  it('re-queues the next in line when an order settles under the in-flight cap, and nothing after stop', () => {
    const { orders, requeued } = oneSlot();
    expect(orders.request(req('a/0'), new Date()).admitted).toBe(true);
    expect(orders.request(req('a/1'), new Date()).admitted).toBe(false);
    orders.settled('a/0', 'valid', new Date());
    expect(requeued).toEqual(['a/1']);
    expect(orders.request(req('a/1'), new Date()).admitted).toBe(true);
    expect(orders.request(req('a/2'), new Date()).admitted).toBe(false);
    orders.stop();
    orders.settled('a/1', 'valid', new Date());
    expect(requeued).toEqual(['a/1']);
  });

  it('gives the place of a withdrawn waiting domain to the next in line, and wakes nobody for a key it does not hold', () => {
    const { orders, requeued } = oneSlot();
    expect(orders.request(req('a/0'), new Date()).admitted).toBe(true);
    expect(orders.request(req('a/1'), new Date()).admitted).toBe(false);
    expect(orders.request(req('a/2'), new Date()).admitted).toBe(false);
    // a/1 is no longer verified: withdrawn, the slot a/0 frees goes to a/2.
    orders.withdraw('a/1');
    expect(requeued).toEqual([]); // no room yet: nobody's turn
    orders.settled('a/0', 'valid', new Date());
    expect(requeued).toEqual(['a/2']);
    // a/2 has not asked yet: a wake now would queue it again. Withdrawing a key the budget does not
    // hold (a domain not in line, at each look) wakes nobody.
    orders.withdraw('x/unknown');
    expect(requeued).toEqual(['a/2']);
    expect(orders.request(req('a/2'), new Date()).admitted).toBe(true);
    expect(orders.budget.withdraw('a/1')).toBe(false);
    expect(orders.budget.withdraw('a/2')).toBe(true); // its slot freed
    orders.stop();
  });
});
