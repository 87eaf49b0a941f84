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

export interface ChallengeStore {
  /** Serves `keyAuthorization` at `/.well-known/acme-challenge/<token>` on every replica. */
  publish(token: string, keyAuthorization: string): Promise<void>;
  /** Stops serving `token`. */
  withdraw(token: string): Promise<void>;
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

export class ConfigMapChallengeStore implements ChallengeStore {
  readonly #local = new InMemoryChallengeStore();
  readonly #objects: KubernetesObjectApi;
  readonly #namespace: string;
  readonly #informer: ResilientInformer<V1ConfigMap>;

  constructor(kubeConfig: KubeConfig, objects: KubernetesObjectApi, namespace: string, log: Logger) {
    this.#objects = objects;
    this.#namespace = namespace;
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

  /** Writes the changes still waiting (withdrawals at shutdown), then stops watching. */
  async stop(): Promise<void> {
    await this.#flushing;
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

  async withdraw(token: string): Promise<void> {
    this.#withdrawnAt.delete(token); // re-inserted at the end: the map stays oldest first
    this.#withdrawnAt.set(token, Date.now());
    await this.#local.withdraw(token);
    await this.#change(token, null);
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
  /** The callers whose changes are in `#pending`. */
  #waiting: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  #flushing: Promise<void> | undefined;

  /**
   * Resolves once the ConfigMap holds the change (rejects with the patch's error). Changes made
   * while a patch is in flight go out together in the next one (a group commit): during a bulk
   * onboarding with many orders in flight, one write carries many key authorizations instead of one
   * write each.
   */
  #change(token: string, value: string | null): Promise<void> {
    this.#pending.set(token, value);
    const done = new Promise<void>((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
    });
    this.#flushing ??= this.#flush();
    return done;
  }

  async #flush(): Promise<void> {
    while (this.#pending.size > 0) {
      const data = Object.fromEntries(this.#pending);
      this.#pending.clear();
      const batch = this.#waiting;
      this.#waiting = [];
      try {
        await this.#patch(data);
        for (const w of batch) w.resolve();
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    this.#flushing = undefined;
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
