/**
 * The bans this server started that have not run out yet, for `portico_ratelimit_bans_active`. A ban
 * lives in Redis with its duration as TTL (`script.ts`); the server that ran the check that banned a
 * key is the one that knows, so each server counts its own, and the bans active in Redis are the sum
 * over the servers. Holds one end time per active ban (a ban that ran out is dropped at the next
 * read), no key ids. Bans started before this process started are not known to it.
 */
export class BanLedger {
  /** Rate-limit domain to the end times of its bans, Unix ms, in the order the bans started. */
  readonly #ends = new Map<string, number[]>();

  /**
   * A ban of `domain` started at `nowMs` for `durationMs` (ms). Drops the domain's oldest bans that
   * have run out, so the ledger stays bounded without a scrape (one policy's bans have one duration,
   * so they end in the order they started; one that does not, after a policy change, goes at the next
   * `active`).
   */
  started(domain: string, nowMs: number, durationMs: number): void {
    const end = nowMs + durationMs;
    const ends = this.#ends.get(domain);
    if (ends === undefined) {
      this.#ends.set(domain, [end]);
      return;
    }
    while (ends.length > 0 && (ends[0] ?? Infinity) <= nowMs) ends.shift();
    ends.push(end);
  }

  /**
   * The bans still running at `nowMs` (Unix ms), by domain; domains without one are left out (and
   * forgotten).
   */
  active(nowMs: number): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [domain, ends] of this.#ends) {
      const running = ends.filter((end) => end > nowMs);
      if (running.length === 0) this.#ends.delete(domain);
      else {
        this.#ends.set(domain, running);
        counts.set(domain, running.length);
      }
    }
    return counts;
  }
}
