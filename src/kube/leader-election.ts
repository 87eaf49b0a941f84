/**
 * Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics
 * (k8s.io/client-go/tools/leaderelection, `tryAcquireOrRenew` and `isLeaseValid`): a candidate
 * takes the Lease when it is free, or when the record it observed has not changed for the holder's
 * `leaseDurationSeconds`, measured on the candidate's own monotonic clock from the moment it saw
 * that record (client-go's `observedRecord` and `observedTime`). The holder's `renewTime` is never
 * compared with the local clock, so a holder whose clock is skewed keeps the Lease while it
 * renews. Writes carry the read's resourceVersion (optimistic concurrency): of two candidates
 * taking the same Lease, one gets a conflict. The leader renews every retry period, gives up
 * leadership as soon as it cannot renew within the renew deadline, and on shutdown releases the
 * Lease (empty holder, 1 s duration) so another replica takes over at once.
 */
import type { KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { leaderElectors } from '../observability/shared-metrics.js';
import { isConflict, isNotFound } from './errors.js';

export interface LeaderElectionOptions {
  namespace: string;
  /** The Lease's name. */
  name: string;
  /** Unique per process, e.g. `<pod name>_<random>`. */
  identity: string;
  /** Seconds a Lease stays valid after its last renewal was observed. */
  leaseDurationSeconds: number;
  /** Seconds the leader keeps trying to renew before it steps down; less than the lease duration. */
  renewDeadlineSeconds: number;
  /** Seconds between tries. */
  retryPeriodSeconds: number;
}

/**
 * A monotonic clock in milliseconds, such as `performance.now`: only the difference between two
 * readings means anything, and it never jumps with the wall clock.
 */
export type MonotonicClock = () => number;

/** The Lease's spec as the API server returns it (times as strings, or Dates once deserialized). */
export type LeaseSpec = NonNullable<LeaseObject['spec']>;

interface LeaseObject extends KubernetesObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string | Date;
    renewTime?: string | Date;
    leaseTransitions?: number;
  };
}

/**
 * What a candidate last saw of the Lease and when, on its own monotonic clock (client-go's
 * `observedRecord` and `observedTime`).
 */
export interface LeaseObservation {
  /**
   * The record's fields (holder, lease duration, acquire and renew times, transitions) as one
   * string: any change to them, such as a renewal, is a new record.
   */
  record: string;
  /** The holder the record names; `''` when the Lease is free. */
  holderIdentity: string;
  /** The holder's lease duration in seconds; the candidate's own when the Lease gives none. */
  leaseDurationSeconds: number;
  /** Monotonic clock reading (ms) when this record was first seen. */
  observedAt: number;
}

/** metav1.MicroTime wants six fractional digits: 2006-01-02T15:04:05.000000Z. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

function timeText(time: string | Date | undefined): string {
  if (time instanceof Date) return Number.isNaN(time.getTime()) ? 'invalid' : time.toISOString();
  return time ?? '';
}

/**
 * Records that `spec` was read at `now` (monotonic ms). Pure. Keeps `previous.observedAt` when the
 * record is the one observed before, so the count towards expiry runs on; any change starts it
 * again. `ownLeaseDurationSeconds` stands in when the Lease has no positive duration of its own.
 */
export function observe(
  previous: LeaseObservation | undefined,
  spec: LeaseSpec | undefined,
  now: number,
  ownLeaseDurationSeconds: number,
): LeaseObservation {
  const holderIdentity = spec?.holderIdentity ?? '';
  const record = JSON.stringify([
    holderIdentity,
    spec?.leaseDurationSeconds ?? null,
    timeText(spec?.acquireTime),
    timeText(spec?.renewTime),
    spec?.leaseTransitions ?? 0,
  ]);
  if (previous?.record === record) return previous;
  const duration = spec?.leaseDurationSeconds;
  return {
    record,
    holderIdentity,
    leaseDurationSeconds: duration !== undefined && duration > 0 ? duration : ownLeaseDurationSeconds,
    observedAt: now,
  };
}

/**
 * May `identity` take the Lease it observed as `observation`, at `now` (monotonic ms, the clock of
 * `observedAt`)? Pure. True when the Lease is free, already ours, or its record has stayed the same
 * for the holder's lease duration (client-go's `isLeaseValid`: valid while
 * `observedTime + leaseDuration > now`).
 */
export function canAcquire(observation: LeaseObservation, identity: string, now: number): boolean {
  const holder = observation.holderIdentity;
  if (holder === '' || holder === identity) return true;
  return observation.observedAt + observation.leaseDurationSeconds * 1000 <= now;
}

export class LeaderElector {
  readonly #objects: KubernetesObjectApi;
  readonly #options: LeaderElectionOptions;
  readonly #log: Logger;
  readonly #clock: MonotonicClock;
  /** The Lease as last read or written, and when; undefined before the first read. */
  #observed: LeaseObservation | undefined;
  #leading = false;
  #lastRenew = 0;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  /** The try (acquire or renew) under way, if any; `stop` waits for it. */
  #inFlight: Promise<void> | undefined;
  #onStarted: () => void = () => undefined;
  #onStopped: () => void = () => undefined;

  /**
   * @param clock measures the lease duration and the renew deadline; tests inject their own.
   * @throws RangeError when the renew deadline is not shorter than the lease duration.
   */
  constructor(
    objects: KubernetesObjectApi,
    options: LeaderElectionOptions,
    log: Logger,
    clock: MonotonicClock = () => performance.now(),
  ) {
    if (options.renewDeadlineSeconds >= options.leaseDurationSeconds) {
      throw new RangeError('the renew deadline must be shorter than the lease duration');
    }
    this.#objects = objects;
    this.#options = options;
    this.#clock = clock;
    this.#log = log.child({ lease: `${options.namespace}/${options.name}`, identity: options.identity });
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** The Lease's name (for the `portico_leader_election_leading` metric). */
  get leaseName(): string {
    return this.#options.name;
  }

  /**
   * Campaigns until `stop`. `onStartedLeading` runs when this process takes the Lease,
   * `onStoppedLeading` the moment it loses it (then it campaigns again). From now until `stop`,
   * `portico_leader_election_leading` reports whether this process leads.
   */
  run(onStartedLeading: () => void, onStoppedLeading: () => void): void {
    leaderElectors.add(this);
    this.#onStarted = onStartedLeading;
    this.#onStopped = onStoppedLeading;
    this.#tick();
  }

  #tick(): void {
    if (this.#stopped) return;
    this.#inFlight = this.#tryAcquireOrRenew().then(
      (held) => {
        this.#afterTry(held);
      },
      (err: unknown) => {
        this.#log.warn({ err }, 'lease update failed');
        this.#afterTry(false);
      },
    );
  }

  #afterTry(held: boolean): void {
    this.#inFlight = undefined;
    // A try that settles after `stop` starts nothing: the process is shutting down.
    if (this.#stopped) return;
    const now = this.#clock();
    if (held) {
      this.#lastRenew = now;
      if (!this.#leading) {
        this.#leading = true;
        this.#log.info('became leader');
        this.#onStarted();
      }
    } else if (this.#leading && now - this.#lastRenew >= this.#options.renewDeadlineSeconds * 1000) {
      this.#leading = false;
      this.#log.warn('lost leadership: could not renew the lease within the renew deadline');
      this.#onStopped();
    }
    if (!this.#stopped) {
      // Jitter the candidates' tries as client-go does (up to +20 %).
      const delay = this.#options.retryPeriodSeconds * 1000 * (this.#leading ? 1 : 1 + Math.random() * 0.2);
      this.#timer = setTimeout(() => {
        this.#tick();
      }, delay);
    }
  }

  #header(): { apiVersion: string; kind: string; metadata: { name: string; namespace: string } } {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.#options.name, namespace: this.#options.namespace },
    };
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    // The wall clock only stamps what this process writes (for people and tools reading the
    // Lease); expiry is judged on the monotonic clock.
    const wallNow = new Date();
    const { identity, leaseDurationSeconds } = this.#options;
    let current: LeaseObject;
    try {
      current = await this.#objects.read<LeaseObject>(this.#header());
    } catch (err) {
      if (!isNotFound(err)) throw err;
      this.#log.debug('no lease yet; creating it');
      const lease: LeaseObject = {
        ...this.#header(),
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds,
          acquireTime: microTime(wallNow),
          renewTime: microTime(wallNow),
          leaseTransitions: 0,
        },
      };
      return this.#write(() => this.#objects.create(lease));
    }
    const now = this.#clock();
    const observed = observe(this.#observed, current.spec, now, leaseDurationSeconds);
    this.#observed = observed;
    if (!canAcquire(observed, identity, now)) {
      this.#log.debug({ holder: observed.holderIdentity }, 'lease held by another candidate');
      return false;
    }
    const ours = current.spec?.holderIdentity === identity;
    const transitions = current.spec?.leaseTransitions ?? 0;
    const next: LeaseObject = {
      ...this.#header(),
      metadata: { ...this.#header().metadata, resourceVersion: current.metadata?.resourceVersion ?? '' },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime:
          ours && current.spec?.acquireTime
            ? microTime(new Date(current.spec.acquireTime))
            : microTime(wallNow),
        renewTime: microTime(wallNow),
        leaseTransitions: ours ? transitions : transitions + 1,
      },
    };
    return this.#write(() => this.#objects.replace(next));
  }

  /**
   * Runs a create or replace and observes what the API server stored; a conflict means another
   * candidate won this round (the next read observes its record).
   */
  async #write(write: () => Promise<LeaseObject>): Promise<boolean> {
    try {
      const stored = await write();
      this.#observed = observe(undefined, stored.spec, this.#clock(), this.#options.leaseDurationSeconds);
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  /**
   * Stops campaigning: waits for a try under way to settle (its result starts nothing), then, when
   * the Lease names this process, releases it so another replica can take it at once. Never throws;
   * a failed release is logged and the Lease expires on its own.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    leaderElectors.delete(this);
    clearTimeout(this.#timer);
    await this.#inFlight;
    // Checked even when not leading: a try that settled after `stop` may have taken the Lease.
    this.#leading = false;
    try {
      const current = await this.#objects.read<LeaseObject>(this.#header());
      if (current.spec?.holderIdentity !== this.#options.identity) return;
      await this.#objects.replace({
        ...this.#header(),
        metadata: { ...this.#header().metadata, resourceVersion: current.metadata?.resourceVersion ?? '' },
        spec: {
          ...current.spec,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: microTime(new Date()),
          renewTime: microTime(new Date()),
        },
      });
      this.#log.info('released the lease');
    } catch (err) {
      this.#log.warn({ err }, 'could not release the lease; it expires on its own');
    }
  }
}
