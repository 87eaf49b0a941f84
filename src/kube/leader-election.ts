/**
 * Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics
 * (k8s.io/client-go/tools/leaderelection): a candidate takes the Lease when it is free or its
 * `renewTime + leaseDurationSeconds` has passed, the leader renews every retry period, gives up
 * leadership as soon as it cannot renew within the renew deadline, and on shutdown releases the
 * Lease (empty holder, 1 s duration) so another replica takes over at once.
 */
import type { KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isConflict, isNotFound } from './errors.js';

export interface LeaderElectionOptions {
  namespace: string;
  /** The Lease's name. */
  name: string;
  /** Unique per process, e.g. `<pod name>_<random>`. */
  identity: string;
  /** Seconds a Lease stays valid after its last renewal. */
  leaseDurationSeconds: number;
  /** Seconds the leader keeps trying to renew before it steps down; less than the lease duration. */
  renewDeadlineSeconds: number;
  /** Seconds between tries. */
  retryPeriodSeconds: number;
}

interface LeaseObject extends KubernetesObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string | Date;
    renewTime?: string | Date;
    leaseTransitions?: number;
  };
}

/** metav1.MicroTime wants six fractional digits: 2006-01-02T15:04:05.000000Z. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/**
 * May `identity` take `lease` at `now`? Pure. True when the Lease is free, already ours, or expired.
 */
export function canAcquire(lease: LeaseObject['spec'] | undefined, identity: string, now: Date): boolean {
  const holder = lease?.holderIdentity ?? '';
  if (holder === '' || holder === identity) return true;
  const renewed = lease?.renewTime ? new Date(lease.renewTime).getTime() : 0;
  return renewed + (lease?.leaseDurationSeconds ?? 0) * 1000 < now.getTime();
}

export class LeaderElector {
  readonly #objects: KubernetesObjectApi;
  readonly #options: LeaderElectionOptions;
  readonly #log: Logger;
  #leading = false;
  #lastRenew = 0;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  /** The try (acquire or renew) under way, if any; `stop` waits for it. */
  #inFlight: Promise<void> | undefined;
  #onStarted: () => void = () => undefined;
  #onStopped: () => void = () => undefined;

  constructor(objects: KubernetesObjectApi, options: LeaderElectionOptions, log: Logger) {
    if (options.renewDeadlineSeconds >= options.leaseDurationSeconds) {
      throw new RangeError('the renew deadline must be shorter than the lease duration');
    }
    this.#objects = objects;
    this.#options = options;
    this.#log = log.child({ lease: `${options.namespace}/${options.name}`, identity: options.identity });
  }

  get leading(): boolean {
    return this.#leading;
  }

  /**
   * Campaigns until `stop`. `onStartedLeading` runs when this process takes the Lease,
   * `onStoppedLeading` the moment it loses it (then it campaigns again).
   */
  run(onStartedLeading: () => void, onStoppedLeading: () => void): void {
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
    const now = Date.now();
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
    const now = new Date();
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
          acquireTime: microTime(now),
          renewTime: microTime(now),
          leaseTransitions: 0,
        },
      };
      return this.#write(() => this.#objects.create(lease));
    }
    if (!canAcquire(current.spec, identity, now)) {
      this.#log.debug({ holder: current.spec?.holderIdentity }, 'lease held by another candidate');
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
          ours && current.spec?.acquireTime ? microTime(new Date(current.spec.acquireTime)) : microTime(now),
        renewTime: microTime(now),
        leaseTransitions: ours ? transitions : transitions + 1,
      },
    };
    return this.#write(() => this.#objects.replace(next));
  }

  /** Runs a create or replace; a conflict means another candidate won this round. */
  async #write(write: () => Promise<unknown>): Promise<boolean> {
    try {
      await write();
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
