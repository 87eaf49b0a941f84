import { describe, expect, it } from 'vitest';
import type { OrderKind } from './order-decision.js';
import { OrderLine, type Entry } from './order-line.js';

let arrivals = 0;
function entry(key: string, tenant: string, queuedAtMs: number, kind: OrderKind = 'first-issuance'): Entry {
  return {
    key,
    tenant,
    hostname: `${key}.example.com`,
    registeredDomain: 'example.com',
    kind,
    kindRank: kind === 'renewal' ? 0 : 1,
    queuedAtMs,
    arrival: arrivals++,
    state: 'active',
    dueMs: 0,
    told: undefined,
  };
}

const keys = (line: OrderLine): (string | undefined)[] =>
  Array.from({ length: line.length }, (_, i) => line.keyAt(i));

describe('OrderLine (the shared line: renewals first, tenants in turn, FIFO within a tenant)', () => {
  it('takes tenants in turn, each oldest first, with renewals ahead of first issuance', () => {
    const line = new OrderLine();
    const entries = [
      entry('a2', 'a', 2),
      entry('a1', 'a', 1),
      entry('a3', 'a', 3),
      entry('b1', 'b', 1),
      entry('b2', 'b', 2),
      entry('c-renewal', 'c', 9, 'renewal'),
    ];
    for (const e of entries) line.add(e);
    expect(keys(line)).toEqual(['c-renewal', 'a1', 'b1', 'a2', 'b2', 'a3']);
    expect(entries.map((e) => line.rank(e))).toEqual([3, 1, 5, 2, 4, 0]);
  });

  it('starts a tenant that joins later in the current round, after the rounds already admitted', () => {
    const line = new OrderLine();
    const [a1, a2, a3] = [entry('a1', 'a', 1), entry('a2', 'a', 2), entry('a3', 'a', 3)];
    const [c1, c2] = [entry('c1', 'c', 1), entry('c2', 'c', 2)];
    for (const e of [a1, a2, a3, c1, c2]) line.add(e);
    // a1 and c1 (round 0), then a2 (round 1) are admitted in turn: round 1 is reached.
    for (const e of [a1, c1, a2]) {
      const stream = line.flightStarted(e);
      const slot = line.remove(e);
      if (slot) line.roundReached(slot);
      line.flightEnded(stream);
    }
    expect(keys(line)).toEqual(['c2', 'a3']);
    // b1 joins in round 1, with c2 (ahead of it: there first) and before a3's round 2, though its
    // request is the oldest of all: it does not jump the rounds already admitted.
    line.add(entry('b1', 'b', 0));
    expect(keys(line)).toEqual(['c2', 'b1', 'a3']);
  });

  it('forgets an entry taken out, and an unknown one holds no place', () => {
    const line = new OrderLine();
    const a1 = entry('a1', 'a', 1);
    const b1 = entry('b1', 'b', 1);
    line.add(a1);
    line.add(b1);
    expect(line.remove(a1)).toBeDefined();
    expect(line.remove(a1)).toBeUndefined();
    expect(keys(line)).toEqual(['b1']);
    expect(line.rank(a1)).toBe(line.length);
  });
});
