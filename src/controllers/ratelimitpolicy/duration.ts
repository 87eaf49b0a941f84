/**
 * Ban durations as written in a RateLimitPolicy: Go-style hours, minutes and seconds (`15m`,
 * `1h30m`, `45s`), the same grammar the CRD's rule checks (`^([0-9]+(h|m|s))+$`). Pure.
 */

const UNIT_SECONDS: Readonly<Record<string, number>> = { h: 3600, m: 60, s: 1 };
const WHOLE = /^([0-9]+(h|m|s))+$/;
const PART = /([0-9]+)(h|m|s)/g;

/** Seconds in `text`, or undefined when it is not of the grammar above. */
export function parseDurationSeconds(text: string): number | undefined {
  if (!WHOLE.test(text)) return undefined;
  let seconds = 0;
  for (const [, amount, unit] of text.matchAll(PART)) {
    seconds += Number(amount) * (UNIT_SECONDS[unit ?? ''] ?? 0);
  }
  return seconds;
}
