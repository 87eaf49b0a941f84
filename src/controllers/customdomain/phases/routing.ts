/**
 * The routing phase of a CustomDomain reconcile: the desired routing objects (src/routing/plan.ts,
 * pure) applied through the owned-objects adapter, stale ones deleted, and the data plane's
 * acknowledgement read from the caches (src/routing/acknowledgement.ts), as a RoutingState for
 * status.ts.
 */
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import {
  CUSTOM_DOMAIN_LABEL,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  ownedNames,
  type CustomDomain,
} from '../../../api/customdomain.js';
import { parsedSecret } from '../../../certificates/parsed-secret.js';
import { combine, type Acknowledgement } from '../../../routing/acknowledgement.js';
import { GATEWAY_API_VERSION, LISTENERSET_KIND } from '../../../routing/gateway.js';
import { flavorWriter, ROUTE_KINDS } from '../../../data-planes/registry.js';
import {
  desiredRouting,
  staleRoutingObjects,
  type RoutingLookups,
  type RoutingPlan,
} from '../../../routing/plan.js';
import type { FlavorWriter } from '../../../data-planes/types.js';
import { reservedDomainOf } from '../acceptance.js';
import type { RoutingState } from '../status.js';
import type { CustomDomainReconcilerDeps } from './deps.js';
import { ReferenceSettle } from './reference-settle.js';
import type { OwnedObjects } from './objects.js';

/** The routing phase's state: Routed, and when to look again (a write held back, `referenceSettle`). */
export type RoutingOutcome = RoutingState & { requeueAfterMs?: number };

/** The routing phase: apply the plan, delete what it no longer has, read the data plane's acknowledgement. */
export class RoutingPhase {
  readonly #d: CustomDomainReconcilerDeps;
  readonly #objects: OwnedObjects;
  /** Write times for the flavor's `referenceSettle` (reference-settle.ts). */
  readonly #settle = new ReferenceSettle();

  constructor(deps: CustomDomainReconcilerDeps, objects: OwnedObjects) {
    this.#d = deps;
    this.#objects = objects;
  }

  /**
   * Applies the routing plan (in its order), then deletes what an earlier plan made and this one
   * does not; then reads from the caches whether the data plane took what was applied
   * (`#acknowledgement`), unless that check is off.
   *
   * @param secretUsable the certificate phase found the domain's Secret usable, or made it usable
   *   again from the last good certificate, just now (`CertificatePhase.usableBeforeRouting`): the
   *   TLS Secret is ready whatever the cache still shows. Undefined: judged from the cache.
   */
  async apply(domain: CustomDomain, secretUsable?: true): Promise<RoutingOutcome> {
    const lookups = this.#routingLookups(domain, secretUsable);
    const plan = desiredRouting(domain, this.#d.routing, lookups);
    const settle = this.#settle.pass(this.#settleRule(), domain.metadata, this.#d.now().getTime());
    const taken: string[] = [];
    const foreign: string[] = [];
    const written = new Set<KubernetesObject>();
    for (const obj of plan.apply) {
      if (settle.holds(obj, () => this.#objects.upToDate(obj))) continue;
      const applied = await this.#objects.applyIfChanged(obj, domain);
      const what = `${obj.kind ?? ''} ${obj.metadata?.name ?? ''}`;
      if (applied.owner !== undefined) taken.push(`${what} (CustomDomain ${applied.owner})`);
      if (applied.foreign) foreign.push(what);
      if (applied.wrote) written.add(obj);
      settle.applied(obj, applied.wrote);
    }
    for (const header of staleRoutingObjects(plan))
      if (settle.mayDelete(header)) await this.#objects.deleteIfCached(header, domain);
    const requeueAfterMs = settle.requeueAfterMs();
    const later = requeueAfterMs === undefined ? {} : { requeueAfterMs };
    const state = nameInUse(taken, foreign) ?? settle.heldState(this.#d.routing.dataPlaneName);
    if (state) return { ...state, ...later };
    return { ...this.#judged(plan, written, domain), ...later };
  }

  /** The flavor's `referenceSettle` in ingress mode; undefined in gateway mode or without one. */
  #settleRule(): FlavorWriter['referenceSettle'] {
    return this.#d.routing.mode === 'gateway' ? undefined : this.#writer().referenceSettle;
  }

  /** The ingress flavor's writer (the `nginx` one when none is configured, as the plan does). */
  #writer(): FlavorWriter {
    return flavorWriter(this.#d.routing.ingressFlavor ?? 'nginx');
  }

  /** Routed from the plan and, unless that check is off, the data plane's acknowledgement. */
  #judged(plan: RoutingPlan, written: ReadonlySet<KubernetesObject>, domain: CustomDomain): RoutingState {
    if (!plan.routed) return { kind: 'not-routed', reason: plan.reason, message: plan.message };
    if (plan.unservable) return { kind: 'not-routed', ...plan.unservable };
    if (this.#d.routing.dataPlaneAcknowledgement === false)
      return { kind: 'routed', message: plan.message, confirmed: false };
    const ack = this.#acknowledgement(plan.apply, written, domain);
    if (ack.kind === 'confirmed')
      return {
        kind: 'routed',
        message: `${plan.message} ${ack.message}`,
        confirmed: true,
        acknowledgement: ack.message,
      };
    return {
      kind: 'not-routed',
      reason: ack.kind === 'refused' ? ack.reason : 'AwaitingDataPlane',
      message: ack.message,
    };
  }

  /**
   * Whether the data plane took the applied objects, each judged by its route kind's `acknowledge`
   * (src/data-planes/registry.ts `ROUTE_KINDS`: the Ingresses, HTTPRoute and ListenerSet, or a data
   * plane's own kind such as Contour's HTTPProxy) from its cached status; a change of that status
   * re-queues the domain through the owned objects' watch. An object of a kind whose status carries
   * a generation (one with a `reporter`) written in this pass is awaited: its cached copy is of the
   * previous generation, and so is the status on it.
   */
  #acknowledgement(
    applied: readonly KubernetesObject[],
    written: ReadonlySet<KubernetesObject>,
    domain: CustomDomain,
  ): Acknowledgement {
    const { namespace } = domain.metadata;
    const { ingressClassName, dataPlaneName } = this.#d.routing;
    const parts: Acknowledgement[] = [];
    for (const obj of applied) {
      const routeKind = obj.kind === undefined ? undefined : ROUTE_KINDS.get(obj.kind);
      if (routeKind?.acknowledge === undefined) continue;
      const name = obj.metadata?.name ?? '';
      if (routeKind.reporter !== undefined && written.has(obj)) {
        parts.push({
          kind: 'awaiting',
          message: `${routeKind.kind} ${name} was written just now; waiting for ${routeKind.reporter(dataPlaneName)} to report on it.`,
        });
        continue;
      }
      const seen = this.#d.view.owned({
        apiVersion: obj.apiVersion ?? '',
        kind: routeKind.kind,
        metadata: { name, namespace },
      });
      const cached = seen.cached ? seen.object : undefined;
      parts.push(
        routeKind.acknowledge({ applied: obj, cached, name, namespace, ingressClassName, dataPlaneName }),
      );
    }
    return combine(parts);
  }

  /**
   * What the routing plan reads of the caches: the ports of the Service a serving domain names
   * (routing/plan.ts checks the port); for a redirect, the CustomDomains of its namespace and the
   * HostnameClaims, from which routing/redirect.ts judges its target.
   */
  #routingLookups(domain: CustomDomain, secretUsable: true | undefined): RoutingLookups {
    const view = this.#d.view;
    const lookups: RoutingLookups = {
      listenerSetsServed: view.serves(GATEWAY_API_VERSION, LISTENERSET_KIND),
    };
    const writer = this.#writer();
    if (writer.requiredKind !== undefined)
      lookups.flavorKindServed = view.serves(writer.requiredKind.apiVersion, writer.requiredKind.kind);
    if (writer.needsTlsSecretReady === true)
      lookups.tlsSecretReady = secretUsable === true || this.#tlsSecretReady(domain);
    if (domain.spec.redirect) {
      lookups.redirectTarget = {
        domainsInNamespace: view.customDomainsInNamespace(domain.metadata.namespace),
        holderOf: (hostname) => {
          const ref = view.hostnameClaim(hostname)?.spec.customDomainRef;
          return ref && { namespace: ref.namespace, name: ref.name };
        },
        reservedDomainOf: (hostname) => reservedDomainOf(hostname, this.#d.reservedDomains),
      };
    }
    const service = domain.spec.service;
    const ports = service && view.servicePorts(domain.metadata.namespace, service.name);
    if (ports !== undefined) lookups.servicePorts = ports;
    return lookups;
  }

  /**
   * Whether the domain's TLS Secret, as its cache holds it, has a `tls.crt` that parses and the
   * `tls.key` of that certificate (`parsedSecret`): Contour takes an HTTPProxy that names the
   * Secret only when both parse (data-planes/contour/httpproxy.ts); looked up for a flavor whose
   * writer asks (`needsTlsSecretReady`). Workers start once the caches have synced;
   * an unsynced cache would answer false (no TLS block until the next reconcile).
   */
  #tlsSecretReady(domain: CustomDomain): boolean {
    const seen = this.#d.view.owned({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { namespace: domain.metadata.namespace, name: ownedNames(domain).secret },
    });
    const secret = seen.cached ? (seen.object as V1Secret | undefined) : undefined;
    return secret !== undefined && parsedSecret(secret)?.keyMatches === true;
  }
}

/**
 * Routed=False `NameInUse` when objects at Portico's names are not this domain's: `taken`, each
 * `Kind name (CustomDomain other)`, by another domain's label; `foreign`, each `Kind name`, not
 * Portico's at all (object-holder.ts `foreignKind`). Undefined when both are empty.
 */
export function nameInUse(taken: readonly string[], foreign: readonly string[]): RoutingState | undefined {
  const sentences: string[] = [];
  if (taken.length > 0)
    sentences.push(
      `${taken.join(', ')} belongs to another CustomDomain by its ${CUSTOM_DOMAIN_LABEL} label; Portico never overwrites another domain's object. Remove that object or correct its label.`,
    );
  if (foreign.length > 0)
    sentences.push(
      `${foreign.join(', ')} exists and is not Portico's (no ${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE} label); Portico never overwrites an HTTPProxy it did not write. Remove or rename that object.`,
    );
  return sentences.length > 0
    ? { kind: 'not-routed', reason: 'NameInUse', message: sentences.join(' ') }
    : undefined;
}

export function notRouted(): RoutingState {
  return {
    kind: 'not-routed',
    reason: 'AwaitingDNSVerification',
    message: 'The domain is routed once DNS verification succeeds.',
  };
}
