/**
 * The shared line of the order budget (`OrderBudget`, order-budget.ts): the waiting requests that
 * the account window and the in-flight cap admit in turn. Renewals come before first issuance;
 * within a kind, tenants take turns (round-robin: every tenant's oldest request, then every
 * tenant's second oldest, and so on; a tenant that joins later starts in the current round, and the
 * turns of a tenant with orders still in flight continue after theirs), FIFO by `queuedAt` within a
 * tenant. A place is a binary search, never a walk of the line: O(log n) comparisons plus an array
 * splice per change. Pure: no clock, no I/O.
 */
import type { OrderKind, OrderQueued } from './order-decision.js';

/** Where a waiting entry is: in the shared line, parked by its registered domain or its hostname. */
export type EntryState = 'active' | 'domain' | 'host' | 'gone';

export interface Entry {
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
export interface Slot {
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

function streamId(entry: Entry): string {
  return `${entry.kindRank}:${entry.tenant}`;
}

/** A domain's or hostname's line: renewals first, then by queuedAt, then in order of first request. */
export function byLine(a: Entry, b: Entry): number {
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
export function lowerBound<T>(items: readonly T[], probe: T, compare: (a: T, b: T) => number): number {
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
export function indexOf<T>(items: readonly T[], item: T, compare: (a: T, b: T) => number): number {
  const index = lowerBound(items, item, compare);
  return items[index] === item ? index : -1;
}

/** The shared line: each tenant's stream of active entries and the slots they hold, in admission order. */
export class OrderLine {
  readonly #streams = new Map<string, Stream>();
  /** The slots of every active entry, in admission order. */
  readonly #slots: Slot[] = [];
  /** Per kind rank, the latest round admitted: where a stream that (re)joins starts. */
  readonly #rounds = [0, 0];
  #seq = 0;

  /** The active entries in line. */
  get length(): number {
    return this.#slots.length;
  }

  /** The key of the entry at 0-based place `index`, if any. */
  keyAt(index: number): string | undefined {
    const slot = this.#slots[index];
    return slot ? slot.stream.items[lowerBound(slot.stream.slots, slot, bySlot)]?.key : undefined;
  }

  /** Puts `entry` in the line: in its stream by queuedAt, with a new slot at the stream's end. */
  add(entry: Entry): void {
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
    this.#slots.splice(lowerBound(this.#slots, slot, bySlot), 0, slot);
  }

  /** Takes `entry` out of the line (its state unchanged); returns the slot it held. */
  remove(entry: Entry): Slot | undefined {
    const stream = this.#streams.get(streamId(entry));
    const index = stream ? indexOf(stream.items, entry, byStream) : -1;
    if (!stream || index < 0) return undefined;
    stream.items.splice(index, 1);
    const [slot] = stream.slots.splice(index, 1);
    const at = slot ? indexOf(this.#slots, slot, bySlot) : -1;
    if (at >= 0) this.#slots.splice(at, 1);
    this.#forgetIfIdle(stream);
    return slot;
  }

  /** 0-based place of an active entry in the line. */
  rank(entry: Entry): number {
    const stream = this.#streams.get(streamId(entry));
    const slot = stream?.slots[indexOf(stream.items, entry, byStream)];
    return slot ? lowerBound(this.#slots, slot, bySlot) : this.#slots.length;
  }

  /**
   * `entry`'s order is admitted (call before taking it out of the line): its stream is kept, with
   * its rounds, while the order is in flight. Returns the stream's id, for `flightEnded`.
   */
  flightStarted(entry: Entry): string {
    const id = streamId(entry);
    const stream = this.#streams.get(id);
    if (stream) stream.inFlight++;
    return id;
  }

  /** The round of `slot`, just admitted, is reached: a stream that (re)joins starts there. */
  roundReached(slot: Slot): void {
    this.#rounds[slot.kindRank] = Math.max(this.#rounds[slot.kindRank] ?? 0, slot.round);
  }

  /** An order of the stream `id` (from `flightStarted`) ended. */
  flightEnded(id: string): void {
    const stream = this.#streams.get(id);
    if (stream) {
      stream.inFlight--;
      this.#forgetIfIdle(stream);
    }
  }

  #forgetIfIdle(stream: Stream): void {
    if (stream.items.length === 0 && stream.inFlight <= 0) this.#streams.delete(stream.id);
  }
}
