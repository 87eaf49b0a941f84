/**
 * Pending HTTP-01 key authorizations, by token (RFC 8555 §8.3), shared by every replica: the leader
 * publishes each one into the ConfigMap `portico-acme-http01` of the operator's namespace and every
 * replica watches it, so whichever replica a challenge request reaches can answer it. Key
 * authorizations are served in clear over HTTP anyway; they are not secrets.
 */
import {
  PatchStrategy,
  type KubeConfig,
  type KubernetesObjectApi,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../api/customdomain.js';
import { isConflict } from '../kube/errors.js';
import { ResilientInformer } from '../kube/informer.js';

export const CHALLENGE_CONFIGMAP = 'portico-acme-http01';
const COMPONENT_LABEL = 'portico.dev/component';
const COMPONENT = 'acme-http01';

export interface WithdrawOptions {
  /**
   * Write the withdrawal at once and resolve when the shared copy has dropped it (rejects with the
   * write's error); the other replicas stop as their watch delivers it. Default false.
   */
  writeNow?: boolean;
}

export interface ChallengeStore {
  /** Serves `keyAuthorization` at `/.well-known/acme-challenge/<token>` on every replica. */
  publish(token: string, keyAuthorization: string): Promise<void>;
  /**
   * Stops serving `token` on this replica at once. Other replicas may go on serving it for a while
   * (ConfigMapChallengeStore: until its next write, at most `withdrawDelayMs`): the CA is done with
   * it, and a key authorization is no secret. `writeNow` (an order cancelled before its challenge
   * was validated): the shared copy drops it before this resolves, and the other replicas within
   * their watch's delay, so the CA is not answered for it.
   */
  withdraw(token: string, options?: WithdrawOptions): Promise<void>;
  get(token: string): string | undefined;
}

/** One process only: for tests of pure logic and single-replica use. */
export class InMemoryChallengeStore implements ChallengeStore {
  readonly #byToken = new Map<string, string>();

  publish(token: string, keyAuthorization: string): Promise<void> {
    this.#byToken.set(token, keyAuthorization);
    return Promise.resolve();
  }

  withdraw(token: string): Promise<void> {
    this.#byToken.delete(token);
    return Promise.resolve();
  }

  get(token: string): string | undefined {
    return this.#byToken.get(token);
  }
}

/**
 * How long a replica ignores the shared ConfigMap's copy of a token it withdrew, milliseconds: its
 * watch delivers the withdrawal within milliseconds unless the API server is struggling, and a
 * challenge is validated within seconds of its publication.
 */
const WITHDRAWN_FOR_MS = 60_000;

/**
 * How long a withdrawal may wait for a publication to carry it to the shared ConfigMap before it is
 * written on its own, milliseconds: 10 s. During a line at the order slots a publication follows
 * within a second or two, so withdrawing costs no write of its own (it was one per order: 2 writes
 * of the ConfigMap per domain issued through 2 slots; docs/performance.md, twelfth round).
 */
export const WITHDRAW_DELAY_MS = 10_000;

export interface ConfigMapChallengeStoreOptions {
  /** WITHDRAW_DELAY_MS unless given (tests), milliseconds. */
  withdrawDelayMs?: number;
}

export class ConfigMapChallengeStore implements ChallengeStore {
  readonly #local = new InMemoryChallengeStore();
  readonly #objects: KubernetesObjectApi;
  readonly #namespace: string;
  readonly #informer: ResilientInformer<V1ConfigMap>;
  readonly #log: Logger;
  readonly #withdrawDelayMs: number;

  constructor(
    kubeConfig: KubeConfig,
    objects: KubernetesObjectApi,
    namespace: string,
    log: Logger,
    options: ConfigMapChallengeStoreOptions = {},
  ) {
    this.#objects = objects;
    this.#namespace = namespace;
    this.#log = log;
    this.#withdrawDelayMs = options.withdrawDelayMs ?? WITHDRAW_DELAY_MS;
    const selector = `${COMPONENT_LABEL}=${COMPONENT}`;
    this.#informer = new ResilientInformer<V1ConfigMap>(kubeConfig, {
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      labelSelector: selector,
      onChange: () => undefined,
      resyncMs: 0,
      log,
    });
  }

  start(): void {
    this.#informer.start();
  }

  /**
   * Writes the changes still waiting (the withdrawals not yet written), then stops watching. A
   * withdrawal whose write fails here stays in the ConfigMap until the next leader's first
   * publication (see `#flush`).
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearWithdrawTimer();
    while (this.#flushing) await this.#flushing;
    if (this.#pending.size > 0) {
      this.#flushing = this.#flush(true);
      await this.#flushing;
    }
    await this.#informer.stop();
  }

  /**
   * The key authorization for `token`: this replica's own, else the shared ConfigMap's as its watch
   * last delivered it; never one this replica withdrew within `WITHDRAWN_FOR_MS`, which its watch
   * may still show for a moment (a CI run read one back right after the withdrawal had reached the
   * other replica).
   */
  get(token: string): string | undefined {
    const own = this.#local.get(token);
    if (own !== undefined) return own;
    if (this.#withdrawnRecently(token)) return undefined;
    return this.#informer.get(CHALLENGE_CONFIGMAP, this.#namespace)?.data?.[token];
  }

  async publish(token: string, keyAuthorization: string): Promise<void> {
    this.#withdrawnAt.delete(token);
    await this.#local.publish(token, keyAuthorization);
    await this.#change(token, keyAuthorization);
  }

  /**
   * Stops serving `token` here at once and resolves; the shared ConfigMap drops it with the next
   * publication's write, or on its own after `withdrawDelayMs`. A failed write is logged and the
   * withdrawal kept for the next one. With `writeNow`, resolves once the ConfigMap has dropped it
   * (rejects with the patch's error).
   */
  async withdraw(token: string, options: WithdrawOptions = {}): Promise<void> {
    // Withdrawn here before (a cancelled order's writeNow, then its clean-up): nothing more to write.
    const already = this.#withdrawnAt.has(token) && this.#local.get(token) === undefined;
    this.#withdrawnAt.delete(token); // re-inserted at the end: the map stays oldest first
    this.#withdrawnAt.set(token, Date.now());
    await this.#local.withdraw(token);
    if (options.writeNow) {
      await this.#change(token, null);
      return;
    }
    if (already) return;
    this.#pending.set(token, null);
    this.#armWithdrawTimer();
  }

  #withdrawTimer: NodeJS.Timeout | undefined;

  #stopped = false;

  #armWithdrawTimer(): void {
    if (this.#withdrawTimer || this.#stopped) return;
    this.#withdrawTimer = setTimeout(() => {
      this.#withdrawTimer = undefined;
      this.#flushing ??= this.#flush(true);
    }, this.#withdrawDelayMs);
    this.#withdrawTimer.unref();
  }

  #clearWithdrawTimer(): void {
    clearTimeout(this.#withdrawTimer);
    this.#withdrawTimer = undefined;
  }

  /** Tokens this replica withdrew: when (Unix time, ms). Tokens are unique per challenge. */
  readonly #withdrawnAt = new Map<string, number>();

  /** True while `token` was withdrawn here less than `WITHDRAWN_FOR_MS` ago; forgets older ones. */
  #withdrawnRecently(token: string): boolean {
    const now = Date.now();
    // Oldest first (insertion order): stop at the first one still recent.
    for (const [withdrawn, at] of this.#withdrawnAt) {
      if (now - at < WITHDRAWN_FOR_MS) break;
      this.#withdrawnAt.delete(withdrawn);
    }
    return this.#withdrawnAt.has(token);
  }

  /** Changes waiting for the next patch, by token (null: withdraw). */
  readonly #pending = new Map<string, string | null>();
  /** The publications whose changes are in `#pending` (a withdrawal does not wait for its write). */
  #waiting: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  #flushing: Promise<void> | undefined;

  /**
   * Resolves once the ConfigMap holds the change (rejects with the patch's error). Changes made
   * while a patch is in flight go out together in the next one (a group commit): during a bulk
   * onboarding with many orders in flight, one write carries many key authorizations instead of one
   * write each, and the withdrawals waiting since the last write.
   */
  #change(token: string, value: string | null): Promise<void> {
    this.#pending.set(token, value);
    const done = new Promise<void>((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
    });
    this.#flushing ??= this.#flush();
    return done;
  }

  /**
   * Writes what `#pending` holds while a publication waits in it (`withdrawals`: also when only
   * withdrawals do, once), in as few patches as the in-flight one allows. What is left (withdrawals,
   * or those of a failed patch) waits for the next publication or the delay.
   */
  async #flush(withdrawals = false): Promise<void> {
    let writeWithdrawals = withdrawals;
    while (this.#pending.size > 0 && (this.#waiting.length > 0 || writeWithdrawals)) {
      writeWithdrawals = false;
      if (this.#waiting.length > 0) this.#dropStale();
      const data = Object.fromEntries(this.#pending);
      this.#pending.clear();
      this.#clearWithdrawTimer();
      const batch = this.#waiting;
      this.#waiting = [];
      try {
        await this.#patch(data);
        for (const w of batch) w.resolve();
      } catch (err) {
        for (const w of batch) w.reject(err);
        this.#keepWithdrawals(data, err);
      }
    }
    if (this.#pending.size > 0) this.#armWithdrawTimer();
    this.#flushing = undefined;
  }

  /**
   * Adds to `#pending` the withdrawal of every token the shared ConfigMap holds (as this replica's
   * watch last delivered it) that this replica neither serves nor has changes for: left by a
   * previous leader that crashed or was killed (its withdrawals of the last seconds, its orders in
   * flight) or by a write that failed at stop. Only a publication's write carries them, and only
   * the leader publishes (one active replica: leader election), so no live token of another
   * replica is dropped; without this they stayed for good, towards the ConfigMap's 1 MiB.
   */
  #dropStale(): void {
    const shared = this.#informer.get(CHALLENGE_CONFIGMAP, this.#namespace)?.data;
    if (!shared) return;
    for (const token of Object.keys(shared)) {
      if (this.#local.get(token) === undefined && !this.#pending.has(token)) this.#pending.set(token, null);
    }
  }

  /** Puts the withdrawals of a failed patch's `data` back in `#pending` (unless changed since). */
  #keepWithdrawals(data: Record<string, string | null>, err: unknown): void {
    const failed = Object.keys(data).filter((t) => data[t] === null && !this.#pending.has(t));
    if (failed.length === 0) return;
    this.#log.warn({ err, withdrawals: failed.length }, 'could not write http-01 withdrawals; retrying');
    for (const t of failed) this.#pending.set(t, null);
  }

  /** Merge-patches `data` (RFC 7386: null removes a key), creating the ConfigMap the first time. */
  async #patch(data: Record<string, string | null>): Promise<void> {
    const header = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: CHALLENGE_CONFIGMAP, namespace: this.#namespace },
    };
    try {
      await this.#objects.patch(
        { ...header, data } as V1ConfigMap,
        undefined,
        undefined,
        'portico-controller',
        undefined,
        PatchStrategy.MergePatch,
      );
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
      const created: V1ConfigMap = {
        ...header,
        metadata: {
          ...header.metadata,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [COMPONENT_LABEL]: COMPONENT },
        },
        data: Object.fromEntries(Object.entries(data).filter((e): e is [string, string] => e[1] !== null)),
      };
      try {
        await this.#objects.create(created);
      } catch (createErr) {
        if (!isConflict(createErr)) throw createErr;
        await this.#patch(data); // created by another replica meanwhile
      }
    }
  }
}
