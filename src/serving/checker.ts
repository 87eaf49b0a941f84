/**
 * The serving check as the CustomDomain reconcile runs it (docs/routing.md, "Serving check"): which domains are due
 * (schedule.ts), at most `maxConcurrent` checks at once (serving-check.ts), and what Ready says
 * meanwhile. One instance per operator process; its memory is lost on restart, so every domain is
 * checked once again after one.
 *
 * The record of each domain's checks lives here, in memory, not in its status: a `lastCheckTime` in
 * status would cost a status write per domain per interval. Between checks, Ready keeps what the
 * last check made it: the domain's own Ready condition, when it is the one the record implies
 * (`carriedReadiness`); when it is not (another condition blocked Ready meanwhile, or the status
 * write of the last check was lost), the domain is checked again at once.
 */
import type { Logger } from 'pino';
import type { Condition } from '../api/customdomain.js';
import { checkServing as realCheckServing, type ServingCheckOptions } from './serving-check.js';
import {
  awaitingPropagation,
  isNewCertificate,
  isNewRoute,
  nextServingCheckAt,
  previousRedirectOriginOf,
  recordServingCheck,
  SERVING_CHECK_PENDING,
  SERVING_PROPAGATION_RETRY_MS,
  servingReadiness,
  type ServingCheckRecord,
  type ServingReadiness,
  type ServingSchedulePolicy,
} from './schedule.js';
import type { ProjectHeader, ServingReason, ServingResult, ServingVerdict } from './verdict.js';

export interface ServingCheckSettings {
  /** The data plane's in-cluster `host:port` (--serving-check-address). */
  address: string;
  /** The data plane's name in Ready's messages, e.g. `Traefik` (--data-plane-name); default "the data plane". */
  dataPlaneName?: string;
  /** Milliseconds for each connection and each request of a check (a check takes at most 4 times this). */
  timeoutMs: number;
  projectHeader?: ProjectHeader;
  policy: ServingSchedulePolicy;
  /**
   * Checks running at once. A due check finds every slot taken: the domain keeps its Ready as it is
   * (or `ServingCheckPending` without an earlier verdict) and is looked at again `busyRetryMs` later,
   * so a blackholed address holds at most this many reconcile workers.
   */
  maxConcurrent: number;
  /**
   * Milliseconds until a domain whose check found no free slot is looked at again; default 2000.
   * With `wake`, the domain is woken sooner, as soon as a slot frees; this is the fallback.
   */
  busyRetryMs?: number;
  /**
   * Called with the key of a domain to reconcile now: `slot` when its due check found every slot
   * taken and one freed (in the order they waited, one per freed slot), so the check runs then
   * instead of `busyRetryMs` later; `answer` when the checker's own probe of a certificate being
   * loaded (`awaitingPropagation`) saw another answer (served), which Ready should say at once.
   * Without it, neither: the reconcile polls.
   */
  wake?: (key: string, why: 'slot' | 'answer') => void;
}

/** What a probe needs of a domain (`ServingChecker.observe`'s domain). */
interface ProbedDomain {
  key: string;
  uid: string;
  hostname: string;
  serialNumber: string;
  /** The origin the domain's spec redirects to; undefined for a serving domain. */
  redirectOrigin?: string | undefined;
}

/** What the reconcile passes to Ready (status.ts, ObservedState.serving) and when to look again. */
export interface ServingObservation {
  readiness: ServingReadiness;
  nextCheckAt: Date;
}

const RESULTS: readonly ServingResult[] = [
  'serving',
  'wrong-certificate',
  'not-reaching-project',
  'unreachable',
];
const REASON_OF: Record<ServingResult, ServingReason> = {
  serving: 'Live',
  'wrong-certificate': 'CertificateNotServed',
  'not-reaching-project': 'ProjectNotReached',
  unreachable: 'DataPlaneUnreachable',
};

/**
 * One domain's record, packed: the uid of the CustomDomain it was made for (a domain deleted and
 * created again under the same name starts afresh), the normalized serial (up to 40 hex digits),
 * and seven numbers (times in epoch milliseconds, NaN for absent). About 320 bytes in V8 with its Map
 * entry and key (measured with Node 24 before `servingSinceMs` was added: 10,000 records, 3.2 MB of
 * heap). Ready's message (another
 * 300 bytes or so) is not kept: between checks it is read back from the domain's Ready condition.
 */
interface PackedRecord {
  uid: string;
  serialNumber: string;
  /** '' for a serving domain's route. */
  redirectOrigin: string;
  /** '' for none. */
  previousRedirectOrigin: string;
  /** '' for none. */
  previousSerialNumber: string;
  lastCheckMs: number;
  /** Index in RESULTS. */
  result: number;
  consecutiveFailures: number;
  failingSinceMs: number;
  /** Index in RESULTS of the run's first failure; -1 for none. */
  failingFrom: number;
  lastServingMs: number;
  servingSinceMs: number;
}

function pack(uid: string, record: ServingCheckRecord): PackedRecord {
  return {
    uid,
    serialNumber: record.serialNumber,
    redirectOrigin: record.redirectOrigin ?? '',
    previousRedirectOrigin: record.previousRedirectOrigin ?? '',
    previousSerialNumber: record.previousSerialNumber ?? '',
    lastCheckMs: Date.parse(record.lastCheckTime),
    result: RESULTS.indexOf(record.lastResult),
    consecutiveFailures: record.consecutiveFailures,
    failingSinceMs: record.failingSince === undefined ? NaN : Date.parse(record.failingSince),
    failingFrom: record.failingFrom === undefined ? -1 : RESULTS.indexOf(record.failingFrom),
    lastServingMs: record.lastServingTime === undefined ? NaN : Date.parse(record.lastServingTime),
    servingSinceMs: record.servingSince === undefined ? NaN : Date.parse(record.servingSince),
  };
}

function unpack(packed: PackedRecord): ServingCheckRecord {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    serialNumber: packed.serialNumber,
    ...(packed.redirectOrigin === '' ? {} : { redirectOrigin: packed.redirectOrigin }),
    ...(packed.previousRedirectOrigin === ''
      ? {}
      : { previousRedirectOrigin: packed.previousRedirectOrigin }),
    ...(packed.previousSerialNumber === '' ? {} : { previousSerialNumber: packed.previousSerialNumber }),
    lastCheckTime: iso(packed.lastCheckMs),
    lastResult: RESULTS[packed.result] ?? 'unreachable',
    consecutiveFailures: packed.consecutiveFailures,
    ...(Number.isNaN(packed.failingSinceMs) ? {} : { failingSince: iso(packed.failingSinceMs) }),
    ...(RESULTS[packed.failingFrom] === undefined ? {} : { failingFrom: RESULTS[packed.failingFrom] }),
    ...(Number.isNaN(packed.lastServingMs) ? {} : { lastServingTime: iso(packed.lastServingMs) }),
    ...(Number.isNaN(packed.servingSinceMs) ? {} : { servingSince: iso(packed.servingSinceMs) }),
  };
}

/**
 * Ready as the last check left it, when the domain's current Ready condition (`ready`) is that:
 * same status and reason as `servingReadiness` gives for the record's result at `now` (so a grace
 * period that ran out since is not carried). Undefined otherwise: the check must run again.
 */
export function carriedReadiness(
  record: ServingCheckRecord,
  ready: Condition | undefined,
  now: Date,
  policy: ServingSchedulePolicy,
): ServingReadiness | undefined {
  const result = record.lastResult;
  const expected = servingReadiness({ result, reason: REASON_OF[result], message: '' }, record, now, policy);
  if (ready?.status !== expected.status || ready.reason !== expected.reason) return undefined;
  return { status: expected.status, reason: expected.reason, message: ready.message };
}

/**
 * The record and Ready after a check made at `now` ended in `verdict`. A serving run goes on, with
 * the time of its first check in Ready's message, only while that message is the domain's Ready
 * (`domain.ready`): a check that sees another answer, or finds Ready saying something else (its
 * status write was lost), starts a new run, checked now.
 */
function afterCheck(
  record: ServingCheckRecord | undefined,
  domain: { serialNumber: string; redirectOrigin?: string | undefined; ready: Condition | undefined },
  verdict: ServingVerdict,
  now: Date,
  policy: ServingSchedulePolicy,
): { next: ServingCheckRecord; readiness: ServingReadiness } {
  const next = recordServingCheck(record, domain.serialNumber, verdict, now, domain.redirectOrigin);
  const readiness = servingReadiness(verdict, next, now, policy);
  const at = now.toISOString();
  if (verdict.result !== 'serving' || next.servingSince === at) return { next, readiness };
  if (domain.ready?.status === 'True' && domain.ready.message === readiness.message)
    return { next, readiness };
  const restarted = { ...next, servingSince: at };
  return { next: restarted, readiness: servingReadiness(verdict, restarted, now, policy) };
}

/** `previousSerialNumber` for a check of `serialNumber`, given the domain's record. */
function previousOf(
  record: ServingCheckRecord | undefined,
  serialNumber: string,
): { previousSerialNumber?: string } {
  if (record === undefined) return {};
  const previous = isNewCertificate(record, serialNumber) ? record.serialNumber : record.previousSerialNumber;
  return previous === undefined || previous === '' ? {} : { previousSerialNumber: previous };
}

export class ServingChecker {
  readonly #settings: ServingCheckSettings;
  readonly #check: (options: ServingCheckOptions) => Promise<ServingVerdict>;
  readonly #records = new Map<string, PackedRecord>();
  /** Keys whose due check found every slot taken, in the order they came; woken as slots free. */
  readonly #waiting = new Set<string>();
  /** Armed probes (`#armProbe`), by key. */
  readonly #probes = new Map<string, NodeJS.Timeout>();
  #running = 0;

  /** `check` is serving-check.ts's checkServing unless a test passes another. */
  constructor(
    settings: ServingCheckSettings,
    check: (options: ServingCheckOptions) => Promise<ServingVerdict> = realCheckServing,
  ) {
    this.#settings = settings;
    this.#check = check;
  }

  /** Checks running now. */
  get running(): number {
    return this.#running;
  }

  /** Domains with a record. */
  get size(): number {
    return this.#records.size;
  }

  /**
   * Ready for the domain `key` (`namespace/name`, of uid `uid`) whose Secret holds the certificate
   * `serialNumber` and whose spec redirects to `redirectOrigin` (undefined: serves the project), with
   * a valid certificate and its route taken: the serving check's verdict when one is due (a new
   * certificate or route is due at once) and a slot is free, else Ready as the last check left it
   * (`carriedReadiness` of the domain's current Ready condition `ready`). Never throws for what the
   * data plane does.
   */
  async observe(
    domain: ProbedDomain & { ready: Condition | undefined },
    now: Date,
    log: Logger,
  ): Promise<ServingObservation> {
    const { policy } = this.#settings;
    const packed = this.#records.get(domain.key);
    const record = packed !== undefined && packed.uid === domain.uid ? unpack(packed) : undefined;
    const dueAt = nextServingCheckAt(record, domain.serialNumber, now, policy, domain.redirectOrigin);
    const carried = record ? carriedReadiness(record, domain.ready, now, policy) : undefined;
    if (dueAt > now && carried) return { readiness: carried, nextCheckAt: dueAt };
    if (this.#running >= this.#settings.maxConcurrent) {
      const nextCheckAt = new Date(now.getTime() + (this.#settings.busyRetryMs ?? 2_000));
      // A re-check of the same certificate and route can wait with Ready as it is; a new one cannot.
      const renewed =
        isNewCertificate(record, domain.serialNumber) || isNewRoute(record, domain.redirectOrigin);
      this.#waiting.add(domain.key);
      return { readiness: (!renewed && carried) || this.#pending(domain), nextCheckAt };
    }
    this.#waiting.delete(domain.key);
    const verdict = await this.#run(domain, record);
    const { next, readiness } = afterCheck(record, domain, verdict, now, policy);
    this.#records.set(domain.key, pack(domain.uid, next));
    if (record?.lastResult !== verdict.result || record.serialNumber !== next.serialNumber)
      log.info({ result: verdict.result, serialNumber: next.serialNumber }, 'serving checked');
    return this.#afterObserved(domain, next, readiness, now, log);
  }

  /**
   * When the reconcile should look again after a check left `next`: its due time, but while the
   * data plane is loading the certificate (`awaitingPropagation`) the checker retries on its own
   * every second (`#armProbe`) and wakes the domain when the answer changes, so the reconcile need
   * not come back before the grace ends (then the check's Warning is due).
   */
  #afterObserved(
    domain: ProbedDomain,
    next: ServingCheckRecord,
    readiness: ServingReadiness,
    now: Date,
    log: Logger,
  ): ServingObservation {
    const { policy } = this.#settings;
    const nextCheckAt = nextServingCheckAt(next, domain.serialNumber, now, policy, domain.redirectOrigin);
    if (this.#settings.wake === undefined || !awaitingPropagation(next, policy))
      return { readiness, nextCheckAt };
    this.#armProbe(domain, log);
    const graceEnd = Date.parse(next.failingSince ?? next.lastCheckTime) + (policy.propagationGraceMs ?? 0);
    return { readiness, nextCheckAt: new Date(Math.max(nextCheckAt.getTime(), graceEnd)) };
  }

  /**
   * Checks `domain` again in `SERVING_PROPAGATION_RETRY_MS` outside the work queue (`#probe`),
   * unless a probe of it is already armed.
   */
  #armProbe(domain: ProbedDomain, log: Logger): void {
    if (this.#probes.has(domain.key)) return;
    const timer = setTimeout(() => {
      this.#probes.delete(domain.key);
      void this.#probe(domain, log);
    }, SERVING_PROPAGATION_RETRY_MS);
    timer.unref();
    this.#probes.set(domain.key, timer);
  }

  /**
   * One check of a domain whose data plane is loading its certificate (`awaitingPropagation`), made
   * by the checker itself: a slot, no reconcile. The record is updated; the domain is woken
   * (`wake`) when the answer changed (served, or another answer), else probed again a second later.
   * Nothing when the record moved on meanwhile (a reconcile's check, a renewal, `forget`); a probe
   * that finds every slot taken tries again a second later. Never throws.
   */
  async #probe(domain: ProbedDomain, log: Logger): Promise<void> {
    const { policy } = this.#settings;
    const packed = this.#records.get(domain.key);
    if (packed === undefined || packed.uid !== domain.uid) return;
    const record = unpack(packed);
    if (
      isNewCertificate(record, domain.serialNumber) ||
      isNewRoute(record, domain.redirectOrigin) ||
      !awaitingPropagation(record, policy)
    )
      return;
    if (this.#running >= this.#settings.maxConcurrent) {
      this.#armProbe(domain, log);
      return;
    }
    let verdict: ServingVerdict;
    try {
      verdict = await this.#run(domain, record);
    } catch (err) {
      log.warn({ err, key: domain.key }, 'serving check probe failed');
      return;
    }
    if (this.#records.get(domain.key) !== packed) return;
    const next = recordServingCheck(record, domain.serialNumber, verdict, new Date(), domain.redirectOrigin);
    this.#records.set(domain.key, pack(domain.uid, next));
    if (verdict.result === record.lastResult && awaitingPropagation(next, policy)) {
      this.#armProbe(domain, log);
      return;
    }
    log.info({ key: domain.key, result: verdict.result, serialNumber: next.serialNumber }, 'serving checked');
    this.#settings.wake?.(domain.key, 'answer');
  }

  /**
   * One check in a slot. The previous certificate named to the check: `record`'s serial when the
   * domain's differs (the first check of a renewed one), else the one `record` keeps as replaced.
   */
  async #run(
    domain: { hostname: string; serialNumber: string; redirectOrigin?: string | undefined },
    record: ServingCheckRecord | undefined,
  ): Promise<ServingVerdict> {
    this.#running++;
    const previousRedirectOrigin = previousRedirectOriginOf(record, domain.redirectOrigin);
    try {
      return await this.#check({
        address: this.#settings.address,
        ...(this.#settings.dataPlaneName === undefined
          ? {}
          : { dataPlaneName: this.#settings.dataPlaneName }),
        hostname: domain.hostname,
        serialNumber: domain.serialNumber,
        ...previousOf(record, domain.serialNumber),
        ...(domain.redirectOrigin === undefined ? {} : { redirectOrigin: domain.redirectOrigin }),
        ...(previousRedirectOrigin === undefined ? {} : { previousRedirectOrigin }),
        timeoutMs: this.#settings.timeoutMs,
        ...(this.#settings.projectHeader ? { projectHeader: this.#settings.projectHeader } : {}),
      });
    } finally {
      this.#running--;
      this.#wakeOne();
    }
  }

  /** Wakes the domain that has waited longest for a slot, if any (`ServingCheckSettings.wake`). */
  #wakeOne(): void {
    const wake = this.#settings.wake;
    if (wake === undefined) return;
    const next = this.#waiting.values().next();
    if (next.done === true) return;
    this.#waiting.delete(next.value);
    wake(next.value, 'slot');
  }

  /** Drops the record of `key` (the domain was removed, or is no longer accepted). */
  forget(key: string): void {
    this.#records.delete(key);
    this.#waiting.delete(key);
    clearTimeout(this.#probes.get(key));
    this.#probes.delete(key);
  }

  #pending(domain: { hostname: string; serialNumber: string }): ServingReadiness {
    return {
      status: 'False',
      reason: SERVING_CHECK_PENDING,
      message: `The serving check of ${domain.hostname} with certificate ${domain.serialNumber} is due and waits for one of the ${this.#settings.maxConcurrent} checks running to finish; Ready follows its verdict.`,
    };
  }
}
