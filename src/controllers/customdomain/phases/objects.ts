/**
 * The adapter through which the reconcile's phases read and write Kubernetes objects: the
 * CustomDomain itself (live read, finalizer), the routing objects and the certificate Secret it
 * owns. Reads the informer caches where they can tell, else the API server; deletes are
 * conditional on the uid judged, applies skip an object whose cached copy already holds the
 * desired state (kube/applied-state.ts).
 */
import { PatchStrategy, type KubernetesObject, type V1Secret } from '@kubernetes/client-node';
import {
  CUSTOM_DOMAIN_PLURAL,
  FIELD_MANAGER,
  FINALIZER,
  GROUP,
  VERSION,
  type CustomDomain,
} from '../../../api/customdomain.js';
import { isNotFound } from '../../../kube/errors.js';
import { serverSideApply } from '../../../kube/server-side-apply.js';
import { isUpToDate, withAppliedDigest } from '../../../kube/applied-state.js';
import { ownedRoutingObjects, type ObjectHeader } from '../../../routing/plan.js';
import { foreignKind, notOurs, otherOwner } from '../object-holder.js';
import type { CustomDomainReconcilerDeps } from './deps.js';

/** The Kubernetes objects a CustomDomain owns, read from the caches or the API server, written by server-side apply. */
export class OwnedObjects {
  readonly #d: Pick<CustomDomainReconcilerDeps, 'view' | 'objects' | 'customObjects' | 'core'>;

  constructor(deps: Pick<CustomDomainReconcilerDeps, 'view' | 'objects' | 'customObjects' | 'core'>) {
    this.#d = deps;
  }

  /** Deletes every routing object Portico may have made for the domain, in any mode or flavor. */
  async removeRouting(domain: CustomDomain): Promise<void> {
    for (const header of ownedRoutingObjects(domain)) await this.deleteIfCached(header, domain);
  }

  /**
   * Deletes `header` unless its cache knows it is absent, or that another CustomDomain owns it (then
   * no request is sent); the delete is conditional on the uid of the object judged, so an object
   * created again meanwhile is not deleted unseen.
   */
  async deleteIfCached(header: ObjectHeader, domain: CustomDomain): Promise<void> {
    const seen = this.#d.view.owned(header);
    if (!seen.cached) {
      await this.deleteIfPresent(header, domain);
      return;
    }
    if (seen.object === undefined || notOurs(header, seen.object, domain)) return;
    await this.deleteObject(header, seen.object.metadata?.uid);
  }

  /** Reads the CustomDomain from the API server, not the cache. */
  async readLive(namespace: string, name: string): Promise<CustomDomain | undefined> {
    try {
      return (await this.#d.customObjects.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: CUSTOM_DOMAIN_PLURAL,
        name,
      })) as CustomDomain;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async addFinalizer(domain: CustomDomain): Promise<CustomDomain> {
    return this.#d.objects.patch(
      {
        apiVersion: domain.apiVersion,
        kind: domain.kind,
        metadata: {
          name: domain.metadata.name,
          namespace: domain.metadata.namespace,
          resourceVersion: domain.metadata.resourceVersion ?? '',
          finalizers: [...(domain.metadata.finalizers ?? []), FINALIZER],
        },
      },
      undefined,
      undefined,
      FIELD_MANAGER,
      undefined,
      PatchStrategy.MergePatch,
    ) as Promise<CustomDomain>;
  }

  /** Reads `header` from the API server and deletes it unless another CustomDomain owns it. */
  async deleteIfPresent(header: ObjectHeader, domain: CustomDomain): Promise<void> {
    const live = await this.readObject(header);
    if (live === undefined || notOurs(header, live, domain)) return;
    await this.deleteObject(header, live.metadata?.uid);
  }

  /**
   * Deletes `header`, only if its uid is still `uid` (a delete precondition: a 409 when it changed,
   * which the work queue retries). Absent already is fine.
   */
  async deleteObject(header: ObjectHeader, uid: string | undefined): Promise<void> {
    try {
      const body = uid ? { preconditions: { uid } } : undefined;
      await this.#d.objects.delete(header, undefined, undefined, undefined, undefined, undefined, body);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** `header` as the API server has it now, or undefined. */
  async readObject(header: ObjectHeader): Promise<KubernetesObject | undefined> {
    try {
      return await this.#d.objects.read(header);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Whether `header` exists as this domain's object (one another CustomDomain owns does not count).
   * Live read, unless the API server does not serve its kind at all.
   */
  async exists(header: ObjectHeader, domain: CustomDomain): Promise<boolean> {
    if (!this.#d.view.serves(header.apiVersion, header.kind)) return false;
    const live = await this.readObject(header);
    return live !== undefined && !notOurs(header, live, domain);
  }

  /**
   * Applies `obj` unless its cached copy already holds what it would write (applied-state.ts), or
   * belongs to another CustomDomain (its owner label): then nothing is written and the owner's name
   * is returned. `wrote`: the object was applied now.
   */
  async applyIfChanged(
    obj: KubernetesObject,
    domain: CustomDomain,
  ): Promise<{ owner?: string; foreign?: boolean; wrote: boolean }> {
    const desired = withAppliedDigest(obj);
    const header = {
      apiVersion: obj.apiVersion ?? '',
      kind: obj.kind ?? '',
      metadata: { name: obj.metadata?.name ?? '', namespace: obj.metadata?.namespace ?? '' },
    };
    const seen = this.#d.view.owned(header);
    // Live read where the cache cannot tell: it is not synced, or (HTTPProxy) it holds only objects
    // labelled as Portico's, and one written by someone else may sit at the name (`foreignKind`).
    const unseen = !seen.cached || (seen.object === undefined && foreignKind(header));
    const current = unseen ? await this.readObject(header) : seen.object;
    const owner = otherOwner(current, domain);
    if (owner !== undefined) return { owner, wrote: false };
    if (current !== undefined && notOurs(header, current, domain)) return { foreign: true, wrote: false };
    if (seen.cached && isUpToDate(seen.object, desired)) return { wrote: false };
    await this.apply(desired);
    return { wrote: true };
  }

  /** True when the cache holds `obj` as it would be written (applied-state.ts): applying it changes nothing. */
  upToDate(obj: KubernetesObject): boolean {
    const seen = this.#d.view.owned({
      apiVersion: obj.apiVersion ?? '',
      kind: obj.kind ?? '',
      metadata: { name: obj.metadata?.name ?? '', namespace: obj.metadata?.namespace ?? '' },
    });
    return seen.cached && isUpToDate(seen.object, withAppliedDigest(obj));
  }

  async apply(obj: KubernetesObject): Promise<void> {
    await serverSideApply(this.#d.objects, obj, { fieldManager: FIELD_MANAGER, force: true });
  }

  async readSecretLive(at: { namespace: string; name: string }): Promise<V1Secret | undefined> {
    try {
      return await this.#d.core.readNamespacedSecret(at);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Removes Portico's finalizer from `live` (the domain as the API server has it), conditional on
   * its resourceVersion. Gone since it was read is fine: its last finalizer was removed by someone
   * else.
   */
  async removeFinalizer(domain: CustomDomain, live: CustomDomain): Promise<void> {
    try {
      await this.#d.objects.patch(
        {
          apiVersion: domain.apiVersion,
          kind: domain.kind,
          metadata: {
            name: domain.metadata.name,
            namespace: domain.metadata.namespace,
            resourceVersion: live.metadata.resourceVersion ?? '',
            finalizers: (live.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
          },
        },
        undefined,
        undefined,
        FIELD_MANAGER,
        undefined,
        PatchStrategy.MergePatch,
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
