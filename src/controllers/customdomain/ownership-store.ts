/**
 * What ownership verification keeps in the API server (docs/customdomains.md, "Ownership
 * verification"), both as Secrets in the operator's namespace (the rights the operator already has
 * for its ACME account key; nothing here is cached by the owned-object informers, which select
 * `portico.dev/customdomain`):
 *
 * - the key of the ownership tokens (src/dns/ownership.ts): 32 random bytes in the Secret
 *   `--ownership-key-secret` (default `portico-ownership-key`), created by the first operator that
 *   needs it. Deleting it changes every token: domains still waiting for their TXT record then show
 *   a new value (every ownership decision, whose proof is keyed by it, is then made again: docs/customdomains.md).
 * - one release record per hostname whose claim was given up: the Secret
 *   `portico-release-<first 40 hex of SHA-256(hostname)>`, holding the hostname, the namespace that
 *   held it (its name and uid) and when. Claims (HostnameClaim objects) keep their meaning, "held now"; these records
 *   are separate objects and only answer "who held it last, and when" for the `recently-claimed`
 *   policy. A record is overwritten by the next release of the same hostname; records are not
 *   deleted (one small Secret per released hostname).
 */
import { createHash, randomBytes } from 'node:crypto';
import { type CoreV1Api, type KubernetesObjectApi, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import { OWNERSHIP_KEY_MIN_BYTES, type HostnameRelease } from '../../dns/ownership.js';
import { isConflict, isNotFound } from '../../kube/errors.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import type { ReleasingNamespace } from './hostname-claims.js';

const KEY_FIELD = 'key';
/** Label on every release record. */
export const HOSTNAME_RELEASE_LABEL = 'portico.dev/hostname-release';

/** Thrown when the key Secret exists but holds no usable key; the message says what to do. */
export class OwnershipKeyError extends Error {
  readonly code = 'OWNERSHIP_KEY_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'OwnershipKeyError';
  }
}

/** The name of the release record of `hostname` (normalized). */
export function releaseRecordName(hostname: string): string {
  return `portico-release-${createHash('sha256').update(hostname).digest('hex').slice(0, 40)}`;
}

export class OwnershipStore {
  readonly #core: CoreV1Api;
  readonly #objects: KubernetesObjectApi;
  readonly #namespace: string;
  readonly #keySecret: string;
  readonly #log: Logger;
  #key: Promise<Buffer> | undefined;
  #loaded: Buffer | undefined;

  /**
   * @param namespace the operator's namespace
   * @param keySecret the name of the Secret that holds the token key
   */
  constructor(
    core: CoreV1Api,
    objects: KubernetesObjectApi,
    options: { namespace: string; keySecret: string },
    log: Logger,
  ) {
    this.#core = core;
    this.#objects = objects;
    this.#namespace = options.namespace;
    this.#keySecret = options.keySecret;
    this.#log = log;
  }

  /**
   * The token key, read once (or created: 32 random bytes) and then kept in memory.
   *
   * @throws OwnershipKeyError when the Secret has no `key` of at least 32 bytes; ApiException for
   *   API errors (the next call tries again)
   */
  async key(): Promise<Buffer> {
    this.#key ??= this.#loadOrCreateKey().then(
      (key) => {
        this.#loaded = key;
        return key;
      },
      (err: unknown) => {
        this.#key = undefined;
        throw err;
      },
    );
    return this.#key;
  }

  /** The token key once `key()` has loaded it; undefined before. */
  loadedKey(): Buffer | undefined {
    return this.#loaded;
  }

  async #loadOrCreateKey(): Promise<Buffer> {
    const at = { namespace: this.#namespace, name: this.#keySecret };
    try {
      const secret = await this.#core.readNamespacedSecret(at);
      const key = Buffer.from(secret.data?.[KEY_FIELD] ?? '', 'base64');
      if (key.length < OWNERSHIP_KEY_MIN_BYTES)
        throw new OwnershipKeyError(
          `Secret ${at.namespace}/${at.name} has no "${KEY_FIELD}" of at least ${OWNERSHIP_KEY_MIN_BYTES} bytes: delete it and Portico creates a new key (domains still waiting for their TXT record then show a new value).`,
        );
      return key;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const key = randomBytes(OWNERSHIP_KEY_MIN_BYTES);
    try {
      await this.#core.createNamespacedSecret({
        namespace: at.namespace,
        body: {
          metadata: { ...at, labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } },
          type: 'Opaque',
          data: { [KEY_FIELD]: key.toString('base64') },
        },
      });
      this.#log.info(at, 'created the ownership token key');
      return key;
    } catch (err) {
      // Another replica created it first: use theirs.
      if (isConflict(err)) return this.#loadOrCreateKey();
      throw err;
    }
  }

  /**
   * Records that the CustomDomain in `namespace` gave up `hostname` at `at` (server-side apply, so
   * a second release of the same hostname overwrites the first).
   *
   * @throws ApiException on any API error
   */
  async recordRelease(hostname: string, namespace: ReleasingNamespace, at: Date): Promise<void> {
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: releaseRecordName(hostname),
        namespace: this.#namespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [HOSTNAME_RELEASE_LABEL]: 'true' },
      },
      type: 'Opaque',
      data: {
        hostname: b64(hostname),
        namespace: b64(namespace.name),
        // The namespace's uid: a namespace of the same name created again is another project.
        ...(namespace.uid ? { namespaceUid: b64(namespace.uid) } : {}),
        releasedAt: b64(at.toISOString()),
      },
    };
    await serverSideApply(this.#objects, secret, { fieldManager: FIELD_MANAGER, force: true });
  }

  /**
   * The last release of `hostname` on record, or undefined (none, or a record that does not parse,
   * which is logged). Read from the API server: the decision it feeds is made once per domain.
   *
   * @throws ApiException on any API error other than 404
   */
  async lastRelease(hostname: string): Promise<HostnameRelease | undefined> {
    let secret: V1Secret;
    try {
      secret = await this.#core.readNamespacedSecret({
        namespace: this.#namespace,
        name: releaseRecordName(hostname),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    const field = (name: string): string => Buffer.from(secret.data?.[name] ?? '', 'base64').toString('utf8');
    const releasedAt = new Date(field('releasedAt'));
    if (field('hostname') !== hostname || Number.isNaN(releasedAt.getTime()) || field('namespace') === '') {
      this.#log.warn(
        { hostname, secret: secret.metadata?.name },
        'ignoring a release record that does not parse',
      );
      return undefined;
    }
    const namespaceUid = field('namespaceUid');
    return { namespace: field('namespace'), ...(namespaceUid ? { namespaceUid } : {}), releasedAt };
  }
}

function b64(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64');
}
