/**
 * A deadline on every request to the ACME CA, and the operator's cancellation of the ones in flight.
 *
 * acme-client 5 sends its requests through one axios instance (`acme.axios`) with no timeout: a CA,
 * or a network path, that accepts the connection and never answers holds the order open forever,
 * and with it the domain's one order slot (IssuanceTracker). An axios timeout alone is not enough:
 * acme-client's response interceptor does not retry a timed-out request but then reads the missing
 * response and fails with a TypeError; and an aborted request (CanceledError) it sleeps on and
 * replays up to 5 times (75 s). `limitAcmeRequests` therefore hands each request to axios's own
 * http adapter with an axios `signal` that fires at the deadline (`AbortSignal.timeout`) or when the
 * tracker run it belongs to is cancelled, and turns what comes back into an error that carries no
 * request config, which acme-client passes through untouched: `AcmeRequestTimeoutError` at the
 * deadline, the run signal's reason on cancellation (as `fetch` does).
 */
import { AcmeStepError, type AcmeStepContext } from './step-error.js';
import { createRequire } from 'node:module';
import { currentIssuanceSignal } from './issuance-tracker.js';

/** The request that got no answer in time. */
export interface UnansweredRequest {
  /** Upper case, e.g. `POST`. */
  readonly method: string;
  readonly url: string;
  /** How long the CA had, milliseconds. */
  readonly timeoutMs: number;
}

/** Where in the issuance it happened, for the message: set by the issuer. */
export type RequestTimeoutContext = AcmeStepContext;

/**
 * The ACME CA did not answer a request within the configured time (`--acme-request-timeout-seconds`);
 * the request was abandoned. A normal failed attempt: `reason` becomes the CertificateReady reason
 * and the next attempt follows the published backoff.
 */
export class AcmeRequestTimeoutError extends AcmeStepError<UnansweredRequest> {
  override readonly code = 'ACME_REQUEST_TIMEOUT';
  override readonly reason = 'IssuanceFailed';
  readonly request: UnansweredRequest;

  constructor(request: UnansweredRequest, context?: RequestTimeoutContext, options?: ErrorOptions) {
    super(requestTimeoutMessage(request, context), context, options);
    this.name = 'AcmeRequestTimeoutError';
    this.request = request;
  }

  protected get facts(): UnansweredRequest {
    return this.request;
  }
}

/** `30 s`, `0.25 s`: a duration in milliseconds written in seconds. */
export function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

/** The message of an `AcmeRequestTimeoutError`; without a trailing period (status appends to it). */
export function requestTimeoutMessage(request: UnansweredRequest, context?: RequestTimeoutContext): string {
  const what = context ? `the ${context.step} for ${context.hostname}` : 'a request';
  return `the ACME CA did not answer ${what} within ${formatSeconds(request.timeoutMs)} (${request.method} ${request.url}); the request was abandoned`;
}

/** What an aborted request was aborted by. */
export interface RequestSignals {
  /** The tracker run's cancellation (the domain was removed), if the request is part of a run. */
  readonly cancel: AbortSignal | undefined;
  /** The caller's own `signal` option, if it set one. */
  readonly caller: AbortSignal | undefined;
  /** Fires at the deadline. */
  readonly deadline: AbortSignal;
}

/**
 * What a request that failed with `err` should fail with instead. Pure. Cancellation wins over the
 * deadline: the run's (or the caller's) abort reason; else an `AcmeRequestTimeoutError` when the
 * deadline has passed; else `err` itself.
 */
export function abortedRequestError(
  err: unknown,
  signals: RequestSignals,
  request: UnansweredRequest,
): unknown {
  if (signals.cancel?.aborted) return signals.cancel.reason;
  if (signals.caller?.aborted) return signals.caller.reason;
  if (signals.deadline.aborted) return new AcmeRequestTimeoutError(request, undefined, { cause: err });
  return err;
}

/** The request config fields the adapter reads (axios's InternalAxiosRequestConfig). */
export interface AdapterRequestConfig {
  url?: string;
  method?: string;
  signal?: unknown;
  validateStatus?: ((status: number) => boolean) | null;
}

/** An axios adapter: sends one request and settles with its response. */
export type RequestAdapter = (config: AdapterRequestConfig) => Promise<unknown>;

/** The part of an axios instance this module touches (acme-client's `acme.axios`). */
export interface AdapterHost {
  defaults: { adapter?: unknown };
}

/** The parts of acme-client's own copy of axios that Portico's adapters use. */
export interface AcmeClientAxios {
  /** axios's Node http adapter: the code acme-client's requests went through before. */
  readonly httpAdapter: RequestAdapter;
  /**
   * Settles a response made without a request the way the http adapter settles a real one (axios's
   * `settle`): returns it when the config's `validateStatus` accepts its status, else throws an
   * AxiosError carrying it (acme-client's validateStatus refuses every status, and its response
   * interceptor then checks the status itself).
   */
  readonly settle: (config: AdapterRequestConfig, response: { status: number }) => unknown;
}

interface AxiosModule {
  getAdapter(name: string): RequestAdapter;
  AxiosError: new (
    message: string,
    code: string,
    config: unknown,
    request: unknown,
    response: unknown,
  ) => Error;
}

/** acme-client's copy of axios (its CommonJS build), resolved from acme-client's own location. */
export function acmeClientAxios(): AcmeClientAxios {
  const fromHere = createRequire(import.meta.url);
  const fromAcmeClient = createRequire(fromHere.resolve('acme-client'));
  const axios = fromAcmeClient('axios') as AxiosModule;
  return {
    httpAdapter: axios.getAdapter('http'),
    settle: (config, response) => {
      const validate = config.validateStatus;
      if (typeof validate !== 'function' || validate(response.status)) return response;
      const code = Math.floor(response.status / 100) === 4 ? 'ERR_BAD_REQUEST' : 'ERR_BAD_RESPONSE';
      throw new axios.AxiosError(
        `Request failed with status code ${response.status}`,
        code,
        config,
        undefined,
        response,
      );
    },
  };
}

const LIMITS = Symbol.for('portico.acme.limitAcmeRequests');

function isAbortSignal(value: unknown): value is AbortSignal {
  return value instanceof AbortSignal;
}

/**
 * Gives every request of acme-client's HTTP client a deadline of `timeoutMs` milliseconds (from the
 * moment it is sent until its whole answer is in, each retry of acme-client a new request) and ties
 * it to the cancel signal of the IssuanceTracker run it is part of (`currentIssuanceSignal()`).
 * A request past its deadline fails with `AcmeRequestTimeoutError` (no step yet; the issuer places
 * it); a cancelled one with the run signal's reason (an `AbortError` DOMException unless the run
 * gave one), at once, without acme-client's retries. Other outcomes are untouched. Affects the whole
 * process, since acme-client has one HTTP client; calling it again changes the deadline only.
 *
 * @param instance acme-client's axios instance, `acme.axios`
 * @param timeoutMs the deadline of each request, milliseconds (a positive integer)
 * @param send the adapter that sends the request; default: axios's http adapter, as acme-client uses
 * @throws RangeError when `timeoutMs` is not a positive integer
 */
export function limitAcmeRequests(instance: AdapterHost, timeoutMs: number, send?: RequestAdapter): void {
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
    throw new RangeError(
      `the ACME request timeout must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  const host = instance as AdapterHost & { [LIMITS]?: { timeoutMs: number } };
  const installed = host[LIMITS];
  if (installed) {
    installed.timeoutMs = timeoutMs;
    return;
  }
  const limits = { timeoutMs };
  host[LIMITS] = limits;
  // Resolved once, when first installed (not on every call that only changes the deadline).
  const sendRequest = send ?? acmeClientAxios().httpAdapter;
  instance.defaults.adapter = async (config: AdapterRequestConfig): Promise<unknown> => {
    const callerSignal = config.signal;
    const signals: RequestSignals = {
      cancel: currentIssuanceSignal(),
      caller: isAbortSignal(callerSignal) ? callerSignal : undefined,
      deadline: AbortSignal.timeout(limits.timeoutMs),
    };
    const request = {
      method: (config.method ?? 'get').toUpperCase(),
      url: config.url ?? '',
      timeoutMs: limits.timeoutMs,
    };
    const signal = AbortSignal.any(
      [signals.cancel, signals.caller, signals.deadline].filter((s) => s !== undefined),
    );
    // Already cancelled (acme-client retrying a cancelled request, or polling on): send nothing.
    if (signal.aborted) throw abortedRequestError(signal.reason, signals, request);
    // The combined signal is on the request's config only while the adapter runs (it settles, and
    // lets go of the signal, before this function resumes): left there, axios would turn any later
    // outcome of the request into a CanceledError, and acme-client replays a failed request with
    // that same config.
    config.signal = signal;
    try {
      return await sendRequest(config);
    } catch (err) {
      throw abortedRequestError(err, signals, request);
    } finally {
      config.signal = callerSignal;
    }
  };
}
