/**
 * At most one certificate order in flight per CustomDomain, run outside the work queue so a slow CA
 * (or the ACME client's own retries) never holds a worker. When a run ends, `onSettled` re-queues
 * the domain; the reconcile reads the outcome here.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { OrderOutcome } from './order-decision.js';

const runSignal = new AsyncLocalStorage<AbortSignal | undefined>();

/**
 * The AbortSignal of the tracker run the caller is part of (anywhere in the async chain a run
 * started), or undefined outside any run. `IssuanceTracker.cancel` fires it: the issuer stops asking
 * the CA and withdraws its challenge at once, without the caller having to hand the signal down.
 */
export function currentIssuanceSignal(): AbortSignal | undefined {
  return runSignal.getStore();
}

/**
 * Runs `fn` outside any tracker run: `currentIssuanceSignal()` is undefined inside it (and in the
 * async work it starts). For work several runs share, such as the ACME account registration, which
 * the cancellation of the run that happened to start it must not abort. Returns what `fn` returns.
 */
export function outsideIssuance<T>(fn: () => T): T {
  return runSignal.run(undefined, fn);
}

export type IssuanceOutcome =
  | { state: 'succeeded'; finishedAt: Date }
  | {
      state: 'failed';
      finishedAt: Date;
      message: string;
      /** UpperCamelCase: the error's own `reason` when it has one, else `IssuanceFailed`. */
      reason: string;
      failures: number;
      /**
       * The CA asked for no new order before this time (its Retry-After on a rate limit, RFC 8555
       * §6.6): the next attempt must not come sooner, whatever the backoff says.
       */
      retryAfter?: Date;
      /** The CA found the challenge invalid (the error's `validationFailed`): a failed validation. */
      validationFailed?: boolean;
    };

/**
 * The abort reason of runs stopped by `IssuanceTracker.stop` (the process is shutting down), as
 * opposed to `cancel` (the domain was removed): `signal.reason === SHUTTING_DOWN`.
 */
export const SHUTTING_DOWN = 'the operator is shutting down';

/**
 * The abort reason of runs stopped by `IssuanceTracker.abandon` (a re-verify replaces an order stuck
 * in flight with a fresh one): `signal.reason === ORDER_ABANDONED`.
 */
export const ORDER_ABANDONED = 'the order was abandoned for a fresh attempt';

interface Run {
  startedAt: Date;
  abort: AbortController;
  hostname: string;
  /** Settles when the run has ended and its outcome is recorded; never rejects. */
  done: Promise<void>;
}

export class IssuanceTracker {
  readonly #inFlight = new Map<string, Run>();
  readonly #outcomes = new Map<string, IssuanceOutcome>();
  readonly #onSettled: (key: string) => void;
  #stopped = false;

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
   * Starts `run` for `key` unless one is in flight or the tracker is stopped (then returns false).
   * `run` gets an AbortSignal that `cancel` and `stop` fire (also readable inside the run as
   * `currentIssuanceSignal()`); its rejection is recorded as a failure, never thrown.
   *
   * @param priorFailures failed attempts in a row before this one, counted when the tracker has no
   *   outcome for `key` (a fresh process resuming from the domain's status.issuance); an outcome in
   *   memory always wins. A failure of this run is recorded as failure number `priorFailures + 1`.
   */
  start(
    key: string,
    hostname: string,
    run: (signal: AbortSignal) => Promise<void>,
    priorFailures = 0,
  ): boolean {
    if (this.#stopped || this.#inFlight.has(key)) return false;
    const abort = new AbortController();
    const previous = this.#outcomes.get(key);
    const failures =
      previous === undefined ? priorFailures : previous.state === 'failed' ? previous.failures : 0;
    const done = runSignal
      .run(abort.signal, () => run(abort.signal))
      .then(
        () => {
          this.#settle(key, abort, { state: 'succeeded', finishedAt: new Date() });
        },
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          const retryAfter = retryAfterOf(err);
          const validationFailed = (err as { validationFailed?: unknown } | null)?.validationFailed === true;
          this.#settle(key, abort, {
            state: 'failed',
            finishedAt: new Date(),
            message,
            reason: reasonOf(err),
            failures: failures + 1,
            ...(retryAfter ? { retryAfter } : {}),
            ...(validationFailed ? { validationFailed } : {}),
          });
        },
      );
    this.#inFlight.set(key, { startedAt: new Date(), abort, hostname, done });
    return true;
  }

  /**
   * Shutdown: starts nothing more, fires the signal of every run in flight with reason
   * `SHUTTING_DOWN` (the issuer withdraws its challenges and stops asking the CA at once), and
   * resolves once every one of them has ended. Never rejects.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    const runs = [...this.#inFlight.values()];
    for (const r of runs) r.abort.abort(SHUTTING_DOWN);
    await Promise.all(runs.map((r) => r.done));
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

  /**
   * Abandons the run in flight for `key` so that a fresh one can start at once (re-verify of an
   * order stuck in flight; docs/customdomains.md, "Verify and re-verify"): fires its signal with
   * reason `ORDER_ABANDONED` (the issuer withdraws its challenge and stops asking the CA) and
   * forgets it; its end is never recorded as an outcome, so it counts as no failure, and
   * `onSettled` is not called for it. The last outcome is kept. The caller frees the run's place in
   * the order budget (`OrderBudget.withdraw`). Returns false when no run was in flight.
   */
  abandon(key: string): boolean {
    const run = this.#inFlight.get(key);
    if (!run) return false;
    run.abort.abort(ORDER_ABANDONED);
    this.#inFlight.delete(key);
    return true;
  }

  /**
   * Drops the last failure of `key`, so the next reconcile starts a fresh attempt (re-verify;
   * docs/customdomains.md, "Verify and re-verify").
   */
  clearFailure(key: string): void {
    if (this.#outcomes.get(key)?.state === 'failed') this.#outcomes.delete(key);
  }
}

/**
 * How a finished run counts for the order budget (order-budget.ts `settled`): a stored certificate
 * is `valid`; a failure the CA's validation caused (`validationFailed`) counts against the
 * hostname's failed validations; anything else (no outcome either) is `failed-other`.
 */
export function orderOutcomeOf(outcome: IssuanceOutcome | undefined): OrderOutcome {
  if (outcome?.state === 'succeeded') return 'valid';
  return outcome?.validationFailed ? 'failed-validation' : 'failed-other';
}

function retryAfterOf(err: unknown): Date | undefined {
  const retryAfter = (err as { retryAfter?: unknown } | null)?.retryAfter;
  return retryAfter instanceof Date && !Number.isNaN(retryAfter.getTime()) ? retryAfter : undefined;
}

function reasonOf(err: unknown): string {
  const reason = (err as { reason?: unknown } | null)?.reason;
  return typeof reason === 'string' && /^[A-Z][A-Za-z0-9]*$/.test(reason) ? reason : 'IssuanceFailed';
}
