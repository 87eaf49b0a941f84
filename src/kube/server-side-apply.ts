import { PatchStrategy, type KubernetesObject, type KubernetesObjectApi } from '@kubernetes/client-node';

/** How an apply claims its fields (Kubernetes server-side apply, "Conflicts"). */
export interface ServerSideApplyOptions {
  /** The field manager the applied fields are recorded under (at most 128 characters). */
  readonly fieldManager: string;
  /**
   * true: take the fields another manager owns (for objects Portico owns outright); false: the apply
   * fails with 409 Conflict naming the other manager (for fields Portico patches on another's object).
   */
  readonly force: boolean;
}

/**
 * Applies `body` with server-side apply under `options.fieldManager`: the fields in `body` become
 * that manager's, fields the manager owned before and `body` leaves out are removed, and an object
 * that does not exist is created. A `metadata.resourceVersion` in `body` is a precondition.
 *
 * @returns the object as the API server stored it
 * @throws the API error: 409 Conflict (a field another manager owns, with `force` false, or a stale
 *   `resourceVersion`), 404 when the kind is not served, 422 when `body` is invalid
 */
export function serverSideApply<T extends KubernetesObject>(
  objects: KubernetesObjectApi,
  body: T,
  options: ServerSideApplyOptions,
): Promise<T> {
  return objects.patch(
    body,
    undefined,
    undefined,
    options.fieldManager,
    options.force,
    PatchStrategy.ServerSideApply,
  );
}
