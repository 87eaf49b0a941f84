/**
 * Pieces the sandbox benchmarks share: reading a positive integer option, a bounded pool of calls,
 * nearest-rank percentiles, seconds as printed, and the machine's busy CPU share. Used by
 * bench:scale, bench:policies and bench:traffic.
 */
import { readFile } from 'node:fs/promises';

/** `value` of option `--name` as a positive integer; throws naming the option otherwise. */
export function positive(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got "${value}"`);
  return n;
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export interface Stats {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles; undefined for no values. */
export function stats(values: readonly number[]): Stats | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0;
  return { count: sorted.length, p50: rank(0.5), p90: rank(0.9), p99: rank(0.99), max: sorted.at(-1) ?? 0 };
}

/** Seconds as the reports print them (`n/a` when unknown). */
export function secs(value: number | undefined, digits = 2): string {
  return value === undefined ? 'n/a' : `${value.toFixed(digits)} s`;
}

/** The machine's CPU time in jiffies (USER_HZ): busy (all but idle and iowait) and total. */
export interface CpuTimes {
  busy: number;
  total: number;
}

/** The machine's CPU times from /proc/stat's first line; undefined where it cannot be read. */
export async function machineCpuTimes(): Promise<CpuTimes | undefined> {
  const stat = await readFile('/proc/stat', 'utf8').catch(() => '');
  const fields = /^cpu\s+(.+)$/m.exec(stat)?.[1]?.trim().split(/\s+/).map(Number);
  if (fields === undefined || fields.length < 5) return undefined;
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * The share of all the machine's CPUs that was busy since `before` (0..1); undefined without both
 * readings or when no time passed.
 */
export async function machineBusySince(before: CpuTimes | undefined): Promise<number | undefined> {
  const now = await machineCpuTimes();
  if (before === undefined || now === undefined || now.total <= before.total) return undefined;
  return (now.busy - before.busy) / (now.total - before.total);
}
