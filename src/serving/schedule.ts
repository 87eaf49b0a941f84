/**
 * When the serving check runs, and what Ready says from its verdicts (docs/routing.md, "Serving check"). Pure: the
 * clock is a parameter.
 *
 * - The first check, and the first after each renewal or change of route: at once. A renewal is
 *   seen as the Secret's serial differing from the serial the last check was made for; a change of
 *   route as the domain's spec answering otherwise than the last check expected (a serving domain
 *   turned into a redirect, a redirect into a serving domain or to another target:
 *   `redirectOrigin`). Either starts the checks afresh: what was seen served before is not evidence
 *   for the new certificate or route, and the propagation grace below applies to it.
 * - While a certificate no check has yet seen served is awaited within the propagation grace
 *   (below: another certificate or the default backend, the data plane still loading what it
 *   took): retried every `SERVING_PROPAGATION_RETRY_MS` (1 s), so Ready follows the data plane
 *   within about a second of it serving (Traefik took 2–9 s here; with the 5, 10, 20 s backoff
 *   Ready lagged what a client saw by 4–15 s at 100 domains, docs/benchmarks.md).
 * - Otherwise while not serving: retried after 5, 10, 20 … seconds, at most `intervalMs` apart (an
 *   ingress controller loads a new Secret or Ingress within seconds; ingress-nginx's sync period
 *   is 1 s).
 * - While serving: re-checked every `intervalMs` (default 10 minutes), so a data plane that later
 *   stops serving the domain (its Ingress dropped, another certificate attached) is noticed.
 * - Ready: True only on `serving` for the current serial. `unreachable` does not take Ready away
 *   from a domain whose last conclusive check for the same serial found it serving, for
 *   `unreachableGraceMs` (default 5 minutes) after the failures began: a restarting ingress
 *   controller or a dropped connection is not the domain's fault (as a transient DNS error never
 *   unverifies a domain: docs/customdomains.md, "DNS faults on a verified domain"). The same grace
 *   covers what the data plane answers when it comes back within that run of failures (its default
 *   certificate or backend while it reloads: `failingFrom`). Otherwise a definite answer (another
 *   certificate, the default backend) takes it away at once.
 * - Propagation: a data plane takes a route (and publishes its acknowledgement) before it has loaded
 *   the domain's Secret and routes: Traefik served its default certificate for about 5 s after its
 *   status write (docs/routing.md, "Traefik"). So for `propagationGraceMs` (default 30 s) after the
 *   first check of a certificate that no check has yet seen served (a new domain, or a renewal),
 *   another certificate or the default backend is reported as `AwaitingServing` (Normal), not as the
 *   verdict's Warning reason. The first check of a certificate runs as soon as its route is
 *   acknowledged and the certificate is in its Secret, so the grace is measured from then. Ready is
 *   False meanwhile, as before: nothing was seen served.
 * - While not serving, Ready's message ends with the time of the run's first failure
 *   (`failingSince`), so a data plane that stopped answering says since when; not a count, so
 *   retries that see the same do not rewrite the status.
 */
import type { ServingReason, ServingResult, ServingSuccess, ServingVerdict } from './verdict.js';
import { normalizeSerial, servedMessage } from './verdict.js';

export const DEFAULT_SERVING_INTERVAL_MS = 10 * 60_000;
export const SERVING_RETRY_BASE_MS = 5_000;
/**
 * Milliseconds between checks while a certificate no check has seen served is awaited within the
 * propagation grace (`awaitingPropagation`): one TLS handshake and one request a second per such
 * domain, for at most `propagationGraceMs`.
 */
export const SERVING_PROPAGATION_RETRY_MS = 1_000;
export const DEFAULT_UNREACHABLE_GRACE_MS = 5 * 60_000;
/** Default of `ServingSchedulePolicy.propagationGraceMs`: 30 s (`--serving-check-propagation-seconds`). */
export const DEFAULT_PROPAGATION_GRACE_MS = 30_000;

/** What is kept of the checks of one domain (e.g. in `status.serving`; times RFC 3339). */
export interface ServingCheckRecord {
  /** The serial the checks were made for (normalized). */
  serialNumber: string;
  /**
   * The route the checks were made for: the origin a redirect domain's spec redirects to
   * (verdict.ts `ServingExpectation.redirectOrigin`); absent for a serving domain.
   */
  redirectOrigin?: string;
  /**
   * The origin the hostname redirected to before its route changed, until a check sees the current
   * route served (verdict.ts `ServingExpectation.previousRedirectOrigin`).
   */
  previousRedirectOrigin?: string;
  /**
   * The serial of the certificate checked before this one (normalized), kept through this one's
   * checks: a data plane still serving it is named as serving "the certificate the renewal
   * replaced" on every retry, not only on the first check of the renewed one.
   */
  previousSerialNumber?: string;
  /** The last check. */
  lastCheckTime: string;
  lastResult: ServingResult;
  /** Checks in a row, for this serial, whose result was not `serving`; 0 after a serving one. */
  consecutiveFailures: number;
  /** The first of those failures; absent while serving. */
  failingSince?: string;
  /**
   * The result of the first of those failures; absent while serving. `unreachable`: the run began
   * with the data plane not answering, so what it serves next may be its restart still loading.
   */
  failingFrom?: ServingResult;
  /** When a check for this serial last found the domain serving; absent if none did. */
  lastServingTime?: string;
  /**
   * The first check of the current run of checks that found the domain serving this serial: Ready's
   * message says "checked <servingSince>", so that a re-check seeing the same leaves the message,
   * and the status, as they are (checker.ts starts a new run when a check sees another answer).
   * Absent while not serving.
   */
  servingSince?: string;
}

export interface ServingSchedulePolicy {
  /** Milliseconds between checks of a serving domain, and the longest retry delay. */
  intervalMs: number;
  /** Milliseconds a serving domain stays Ready while the data plane cannot be reached. */
  unreachableGraceMs: number;
  /**
   * Milliseconds after the first check of a certificate not yet seen served during which another
   * certificate or the default backend is `AwaitingServing` rather than a Warning (the data plane
   * loading the Secret and route it took); default DEFAULT_PROPAGATION_GRACE_MS, 0 for none.
   */
  propagationGraceMs?: number;
}

export const DEFAULT_SERVING_SCHEDULE: ServingSchedulePolicy = {
  intervalMs: DEFAULT_SERVING_INTERVAL_MS,
  unreachableGraceMs: DEFAULT_UNREACHABLE_GRACE_MS,
};

/** True when `record` was made for another certificate than `serialNumber` (or there is none). */
export function isNewCertificate(record: ServingCheckRecord | undefined, serialNumber: string): boolean {
  return record === undefined || record.serialNumber !== normalizeSerial(serialNumber);
}

/**
 * True when `record` was made for another route than `redirectOrigin` (undefined: a serving
 * domain's): the domain's spec changed what it answers since.
 */
export function isNewRoute(
  record: ServingCheckRecord | undefined,
  redirectOrigin: string | undefined,
): boolean {
  return record !== undefined && (record.redirectOrigin ?? '') !== (redirectOrigin ?? '');
}

/**
 * The origin the hostname redirected to before its route changed, for a check of the route
 * `redirectOrigin` given the domain's `record`: the record's own route when it was another, else what
 * the record kept. Undefined when there is none.
 */
export function previousRedirectOriginOf(
  record: ServingCheckRecord | undefined,
  redirectOrigin: string | undefined,
): string | undefined {
  if (record === undefined) return undefined;
  return isNewRoute(record, redirectOrigin) ? record.redirectOrigin : record.previousRedirectOrigin;
}

/**
 * When the next check of a domain whose Secret holds `serialNumber` and whose spec answers
 * `redirectOrigin` (undefined: serves) is due: `now` for a first check, a renewed certificate or a
 * changed route, else after the interval or the retry delay, never before `now`.
 */
export function nextServingCheckAt(
  record: ServingCheckRecord | undefined,
  serialNumber: string,
  now: Date,
  policy: ServingSchedulePolicy = DEFAULT_SERVING_SCHEDULE,
  redirectOrigin?: string,
): Date {
  if (record === undefined || isNewCertificate(record, serialNumber) || isNewRoute(record, redirectOrigin))
    return now;
  const delay = record.lastResult === 'serving' ? policy.intervalMs : failingDelayMs(record, policy);
  return new Date(Math.max(now.getTime(), Date.parse(record.lastCheckTime) + delay));
}

/**
 * The wait after a failed check: a second while the propagation is awaited (`awaitingPropagation`);
 * after a grace spent so, as long as the run has lasted (at least 5 s), which doubles it as the
 * backoff would (counted in checks, a grace of checks a second apart would jump to the interval);
 * else 5 s doubling with each failure. At most `intervalMs`.
 */
function failingDelayMs(record: ServingCheckRecord, policy: ServingSchedulePolicy): number {
  if (awaitingPropagation(record, policy)) return Math.min(policy.intervalMs, SERVING_PROPAGATION_RETRY_MS);
  const backoff = SERVING_RETRY_BASE_MS * 2 ** Math.max(0, record.consecutiveFailures - 1);
  const lasted = Date.parse(record.lastCheckTime) - Date.parse(record.failingSince ?? record.lastCheckTime);
  const propagated = loadingAnswer(record) && (policy.propagationGraceMs ?? DEFAULT_PROPAGATION_GRACE_MS) > 0;
  return Math.min(policy.intervalMs, propagated ? Math.max(SERVING_RETRY_BASE_MS, lasted) : backoff);
}

/** The last check saw what a data plane loading a certificate no check has seen served answers. */
function loadingAnswer(record: ServingCheckRecord): boolean {
  return (
    (record.lastResult === 'wrong-certificate' || record.lastResult === 'not-reaching-project') &&
    record.lastServingTime === undefined
  );
}

/**
 * True when `record`'s last check found the data plane still loading a certificate no check has
 * seen served (another certificate, or the default backend) and was made within
 * `propagationGraceMs` of the run's first failure: the case `servingReadiness` reports as
 * `AwaitingServing`.
 */
export function awaitingPropagation(record: ServingCheckRecord, policy: ServingSchedulePolicy): boolean {
  if (!loadingAnswer(record)) return false;
  const graceMs = policy.propagationGraceMs ?? DEFAULT_PROPAGATION_GRACE_MS;
  const since = Date.parse(record.failingSince ?? record.lastCheckTime);
  return Date.parse(record.lastCheckTime) < since + graceMs;
}

/**
 * The record after a check made at `now` for `serialNumber` and the route `redirectOrigin`
 * (undefined: a serving domain's) ended in `verdict`. A new certificate or a new route starts a new
 * record; the previous serial and the previous route are carried over.
 */
export function recordServingCheck(
  record: ServingCheckRecord | undefined,
  serialNumber: string,
  verdict: Pick<ServingVerdict, 'result'>,
  now: Date,
  redirectOrigin?: string,
): ServingCheckRecord {
  const serial = normalizeSerial(serialNumber);
  const sameSerial = record !== undefined && record.serialNumber === serial;
  const same = sameSerial && !isNewRoute(record, redirectOrigin) ? record : undefined;
  const at = now.toISOString();
  const previous = sameSerial ? record?.previousSerialNumber : record?.serialNumber;
  const replaced = previous === undefined || previous === '' ? {} : { previousSerialNumber: previous };
  const route = routeFields(record, redirectOrigin, verdict);
  if (verdict.result === 'serving') {
    return {
      serialNumber: serial,
      ...route,
      ...replaced,
      lastCheckTime: at,
      lastResult: 'serving',
      consecutiveFailures: 0,
      lastServingTime: at,
      servingSince: (same?.lastResult === 'serving' ? same.servingSince : undefined) ?? at,
    };
  }
  return {
    serialNumber: serial,
    ...route,
    ...replaced,
    lastCheckTime: at,
    lastResult: verdict.result,
    ...failingRun(same, verdict, at),
  };
}

/** The route fields of the record after a check of `redirectOrigin` ended in `verdict`. */
function routeFields(
  record: ServingCheckRecord | undefined,
  redirectOrigin: string | undefined,
  verdict: Pick<ServingVerdict, 'result'>,
): Pick<ServingCheckRecord, 'redirectOrigin' | 'previousRedirectOrigin'> {
  const earlier = previousRedirectOriginOf(record, redirectOrigin);
  return {
    ...(redirectOrigin === undefined ? {} : { redirectOrigin }),
    // Kept until a check sees the current route served.
    ...(earlier === undefined || verdict.result === 'serving' ? {} : { previousRedirectOrigin: earlier }),
  };
}

/** The failure run's fields after a failed check at `at`, continuing `same`'s run when it has one. */
function failingRun(
  same: ServingCheckRecord | undefined,
  verdict: Pick<ServingVerdict, 'result'>,
  at: string,
): Pick<ServingCheckRecord, 'consecutiveFailures' | 'failingSince' | 'failingFrom' | 'lastServingTime'> {
  const running = same?.failingSince !== undefined ? same : undefined;
  return {
    consecutiveFailures: (same?.consecutiveFailures ?? 0) + 1,
    failingSince: running?.failingSince ?? at,
    failingFrom: running?.failingFrom ?? verdict.result,
    ...(same?.lastServingTime !== undefined ? { lastServingTime: same.lastServingTime } : {}),
  };
}

/**
 * Ready's reason while a due check has not run: every check slot is taken (checker.ts caps them),
 * and no earlier verdict for this certificate is at hand. Normal: it runs within seconds.
 */
export const SERVING_CHECK_PENDING = 'ServingCheckPending';

/**
 * Ready's reason while a certificate no check has seen served is not served yet, within the
 * propagation grace (`ServingSchedulePolicy.propagationGraceMs`): the data plane is loading it.
 */
export const AWAITING_SERVING = 'AwaitingServing';

/** Ready as the serving check has it. */
export interface ServingReadiness {
  status: 'True' | 'False';
  reason: ServingReason | typeof SERVING_CHECK_PENDING | typeof AWAITING_SERVING;
  message: string;
}

/**
 * `checked <time> (re-checked every <interval>)`: the first check of the current serving run, and
 * the schedule of the next ones (the interval in minutes when whole, else seconds). The same words
 * while re-checks see the same answer: no status write for them.
 */
function checkedPhrase(record: ServingCheckRecord, policy: ServingSchedulePolicy): string {
  const since = record.servingSince ?? record.lastCheckTime;
  const minutes = policy.intervalMs / 60_000;
  const every = Number.isInteger(minutes)
    ? `${minutes} minute${minutes === 1 ? '' : 's'}`
    : `${policy.intervalMs / 1000} seconds`;
  return `checked ${since} (re-checked every ${every})`;
}

/**
 * Ready kept True for a domain that served this serial while the data plane does not answer, or
 * answers otherwise as it comes back (a run of failures that began `unreachable`: a restarted
 * Traefik serves its default certificate until it has loaded the Secrets again), for
 * `unreachableGraceMs` from the run's first failure; undefined otherwise.
 */
function keptThroughOutage(
  verdict: Pick<ServingVerdict, 'result' | 'message'>,
  record: ServingCheckRecord,
  now: Date,
  policy: ServingSchedulePolicy,
): ServingReadiness | undefined {
  const outage = verdict.result === 'unreachable' || record.failingFrom === 'unreachable';
  if (!outage || record.lastServingTime === undefined) return undefined;
  const until = Date.parse(record.failingSince ?? record.lastCheckTime) + policy.unreachableGraceMs;
  if (now.getTime() >= until) return undefined;
  return {
    status: 'True',
    reason: 'Live',
    message: `Served as checked at ${record.lastServingTime}; the latest check failed: ${verdict.message} Ready stays True until ${new Date(until).toISOString()} unless a check succeeds.`,
  };
}

/**
 * Ready from the latest `verdict` and the `record` that includes it (recordServingCheck's result).
 * An unreachable data plane keeps a domain that served this serial Ready during the grace period,
 * with Ready's reason `Live` and the failure in the message.
 */
export function servingReadiness(
  verdict: Pick<ServingVerdict, 'result' | 'reason' | 'message'> &
    Partial<Pick<ServingSuccess, 'served' | 'answer'>>,
  record: ServingCheckRecord,
  now: Date,
  policy: ServingSchedulePolicy = DEFAULT_SERVING_SCHEDULE,
): ServingReadiness {
  if (verdict.result === 'serving') {
    const { served, answer } = verdict;
    const message =
      served === undefined || answer === undefined
        ? verdict.message
        : servedMessage({ served, answer }, checkedPhrase(record, policy));
    return { status: 'True', reason: 'Live', message };
  }
  const kept = keptThroughOutage(verdict, record, now, policy);
  if (kept) return kept;
  const failingSince = record.failingSince ?? record.lastCheckTime;
  // The start of the run only, not a count: the message stays the same while retries see the same.
  const run = ` Failing since ${failingSince}.`;
  const graceMs = policy.propagationGraceMs ?? DEFAULT_PROPAGATION_GRACE_MS;
  const propagating =
    (verdict.result === 'wrong-certificate' || verdict.result === 'not-reaching-project') &&
    record.lastServingTime === undefined &&
    now.getTime() < Date.parse(failingSince) + graceMs;
  if (propagating) {
    const until = new Date(Date.parse(failingSince) + graceMs).toISOString();
    return {
      status: 'False',
      reason: AWAITING_SERVING,
      message:
        `Waiting for the data plane to load the route and certificate it took: ${verdict.message} ` +
        `Normal for up to ${graceMs / 1000} s after the first check of this certificate (${failingSince}); ` +
        `reported as ${verdict.reason} from ${until} if it persists.`,
    };
  }
  return { status: 'False', reason: verdict.reason, message: `${verdict.message}${run}` };
}
