/**
 * Pieces the sandbox benchmarks share: reading a positive integer option, a bounded pool of calls,
 * nearest-rank percentiles, and seconds as printed. Used by bench:scale and bench:policies.
 */

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
  p99: number;
  max: number;
}

/** Nearest-rank percentiles; undefined for no values. */
export function stats(values: readonly number[]): Stats | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0;
  return { count: sorted.length, p50: rank(0.5), p99: rank(0.99), max: sorted.at(-1) ?? 0 };
}

/** Seconds as the reports print them (`n/a` when unknown). */
export function secs(value: number | undefined, digits = 2): string {
  return value === undefined ? 'n/a' : `${value.toFixed(digits)} s`;
}
