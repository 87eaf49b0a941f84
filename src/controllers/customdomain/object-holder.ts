/**
 * Whose an object at a name Portico uses is, as the reconcile must know before it applies or
 * deletes one: Portico never overwrites or deletes another CustomDomain's object, nor an HTTPProxy
 * it did not write. Pure: reads labels and owner references only.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { CUSTOM_DOMAIN_LABEL, type CustomDomain } from '../../api/customdomain.js';
import { ROUTE_KINDS } from '../../data-planes/registry.js';
import { controllerOwnerUid } from '../../routing/foreign-routes.js';
import type { ObjectHeader } from '../../routing/plan.js';

/**
 * The CustomDomain that `obj`'s owner label (`portico.dev/customdomain`) names when it is another
 * than `domain`; undefined when it names `domain` or there is no such label (an object made by
 * hand at a name Portico uses is Portico's to replace).
 */
export function otherOwner(obj: KubernetesObject | undefined, domain: CustomDomain): string | undefined {
  const owner = obj?.metadata?.labels?.[CUSTOM_DOMAIN_LABEL];
  return owner !== undefined && owner !== domain.metadata.name ? owner : undefined;
}

/**
 * Kinds where an object without a controller ownerReference to the domain (by uid) is someone
 * else's and never overwritten or deleted, whatever its labels say: the route kinds of
 * src/data-planes/ with `ownedByReferenceOnly`, today Contour's HTTPProxy (docs/routing.md,
 * "Foreign routes"). A platform team writes its own
 * HTTPProxies (e.g. the API's, which RateLimitPolicies target) in the same namespaces, and one at
 * `portico-<name>` is theirs, not a leftover of Portico's. (Other kinds keep the rule of
 * `otherOwner`: an unlabelled object at Portico's name is Portico's to replace.)
 */
export function foreignKind(header: ObjectHeader): boolean {
  const routeKind = ROUTE_KINDS.get(header.kind);
  return routeKind?.ownedByReferenceOnly === true && routeKind.apiVersion === header.apiVersion;
}

/**
 * Whether `obj` (at `header`) must be left alone by `domain`: another CustomDomain's by its owner
 * label, or, for a `foreignKind`, without a controller ownerReference to `domain`'s uid (a label
 * is anyone's to write; Portico writes the reference on every object it owns).
 */
export function notOurs(header: ObjectHeader, obj: KubernetesObject, domain: CustomDomain): boolean {
  if (otherOwner(obj, domain) !== undefined) return true;
  if (!foreignKind(header)) return false;
  const uid = domain.metadata.uid;
  return uid === undefined || uid === '' || controllerOwnerUid(obj) !== uid;
}
