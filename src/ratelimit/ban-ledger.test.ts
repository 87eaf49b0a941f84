import { describe, expect, it } from 'vitest';
import { BanLedger } from './ban-ledger.js';

describe('BanLedger', () => {
  it('counts the bans of each domain until each runs out, and forgets a domain with none', () => {
    const ledger = new BanLedger();
    ledger.started('a/p', 1_000, 3_000);
    ledger.started('a/p', 2_000, 3_000);
    ledger.started('b/p', 1_500, 60_000);
    expect(ledger.active(3_999)).toEqual(
      new Map([
        ['a/p', 2],
        ['b/p', 1],
      ]),
    );
    expect(ledger.active(4_000)).toEqual(
      new Map([
        ['a/p', 1],
        ['b/p', 1],
      ]),
    );
    expect(ledger.active(5_000)).toEqual(new Map([['b/p', 1]]));
    expect(ledger.active(61_500)).toEqual(new Map());
  });

  it('counts a ban of a changed duration that ends before older ones', () => {
    const ledger = new BanLedger();
    ledger.started('a/p', 0, 10_000);
    ledger.started('a/p', 1_000, 1_000);
    expect(ledger.active(1_999)).toEqual(new Map([['a/p', 2]]));
    expect(ledger.active(2_000)).toEqual(new Map([['a/p', 1]]));
  });

  it('drops ended bans as new ones start, without a read in between', () => {
    const ledger = new BanLedger();
    for (let i = 0; i < 1_000; i++) ledger.started('a/p', i * 1_000, 1_000);
    // Only the last ban runs at its own start time plus less than its duration.
    expect(ledger.active(999_500)).toEqual(new Map([['a/p', 1]]));
  });
});
