/**
 * At most one certificate order in flight per CustomDomain, run outside the work queue so a slow CA
 * (or the ACME client's own retries) never holds a worker. When a run ends, `onSettled` re-queues
 * the domain; the reconcile reads the outcome here.
 */
export type IssuanceOutcome =
  | { state: 'succeeded'; finishedAt: Date }
  | {
      state: 'failed';
      finishedAt: Date;
      message: string;
      /** UpperCamelCase: the error's own `reason` when it has one, else `IssuanceFailed`. */
      reason: string;
      failures: number;
    };

export class IssuanceTracker {
  readonly #inFlight = new Map<string, { startedAt: Date; abort: AbortController; hostname: string }>();
  readonly #outcomes = new Map<string, IssuanceOutcome>();
  readonly #onSettled: (key: string) => void;

  constructor(onSettled: (key: string) => void) {
    this.#onSettled = onSettled;
  }

  /** The run in flight for `key`, or undefined. */
  inFlight(key: string): { startedAt: Date; hostname: string } | undefined {
    return this.#inFlight.get(key);
  }

  /** The outcome of the last finished run for `key`, or undefined. */
  lastOutcome(key: string): IssuanceOutcome | undefined {
    return this.#outcomes.get(key);
  }

  /**
   * Starts `run` for `key` unless one is in flight (then returns false). `run` gets an AbortSignal
   * that `cancel` fires; its rejection is recorded as a failure, never thrown.
   */
  start(key: string, hostname: string, run: (signal: AbortSignal) => Promise<void>): boolean {
    if (this.#inFlight.has(key)) return false;
    const abort = new AbortController();
    this.#inFlight.set(key, { startedAt: new Date(), abort, hostname });
    const previous = this.#outcomes.get(key);
    const failures = previous?.state === 'failed' ? previous.failures : 0;
    run(abort.signal).then(
      () => {
        this.#settle(key, abort, { state: 'succeeded', finishedAt: new Date() });
      },
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        this.#settle(key, abort, {
          state: 'failed',
          finishedAt: new Date(),
          message,
          reason: reasonOf(err),
          failures: failures + 1,
        });
      },
    );
    return true;
  }

  #settle(key: string, abort: AbortController, outcome: IssuanceOutcome): void {
    if (this.#inFlight.get(key)?.abort !== abort) return; // cancelled meanwhile
    this.#inFlight.delete(key);
    this.#outcomes.set(key, outcome);
    this.#onSettled(key);
  }

  /** Forgets `key`: aborts a run in flight and drops its outcome (the domain was removed). */
  cancel(key: string): void {
    this.#inFlight.get(key)?.abort.abort();
    this.#inFlight.delete(key);
    this.#outcomes.delete(key);
  }

  /** Drops the last failure of `key`, so the next reconcile starts a fresh attempt (re-verify, spec §3). */
  clearFailure(key: string): void {
    if (this.#outcomes.get(key)?.state === 'failed') this.#outcomes.delete(key);
  }
}

function reasonOf(err: unknown): string {
  const reason = (err as { reason?: unknown } | null)?.reason;
  return typeof reason === 'string' && /^[A-Z][A-Za-z0-9]*$/.test(reason) ? reason : 'IssuanceFailed';
}
