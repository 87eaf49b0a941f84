/**
 * What a data plane is to Portico (docs/architecture.md, "A data plane is one folder"): one module
 * per data plane under `src/data-planes/<name>/`, registered in `registry.ts` (the operator's side,
 * pure) and, when the sandbox can start it, in `sandbox-registry.ts` (development only). Pure: types.
 */
import type {
  KubeConfig,
  KubernetesObject,
  KubernetesObjectApi,
  V1ObjectMeta,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { CustomDomain } from '../api/customdomain.js';
import type { PolicyTargetRef, RateLimitPolicy } from '../api/ratelimitpolicy.js';
import type { RateLimitAttachedReason } from '../api/reasons.js';
import type { Acknowledgement } from '../routing/acknowledgement.js';
import type { FlavorPlan, ObjectHeader, RoutingLookups } from '../routing/flavor-plan.js';
import type { RoutingOptions } from '../routing/options.js';
import type { RateLimitHeaders } from '../routing/ratelimit-descriptors.js';
import type { RedirectIntent } from '../routing/redirect.js';

/**
 * What Portico writes, by its settings: `nginx`, `traefik`, `contour` (ingress mode and its
 * `--ingress-flavor`) or `gateway` (gateway mode).
 */
export type RoutingFlavor = 'nginx' | 'traefik' | 'contour' | 'gateway';

export const ROUTING_FLAVORS: readonly RoutingFlavor[] = ['nginx', 'traefik', 'contour', 'gateway'];

/**
 * The flavors of ingress mode (`--ingress-flavor`): every flavor but Gateway API's, each written by
 * the data plane module that brings it (`flavorWriter`).
 */
export type IngressFlavor = Exclude<RoutingFlavor, 'gateway'>;

export const INGRESS_FLAVORS: readonly IngressFlavor[] = ROUTING_FLAVORS.filter(
  (f): f is IngressFlavor => f !== 'gateway',
);

/**
 * What an ingress flavor writes for a domain (`--routing-mode ingress --ingress-flavor <flavor>`):
 * the data plane module that brings the flavor carries its writer (`flavorWriter`); routing/plan.ts
 * judges what every flavor shares (the data plane × flavor table, a refused redirect target) and
 * asks the writer for the rest. Gateway API mode is every gateway's, written in routing/plan.ts.
 */
export interface FlavorWriter {
  readonly flavor: IngressFlavor;
  /**
   * The domain's objects, in apply order, and the Routed sentence (routing/flavor-plan.ts has the
   * parts). Never throws for a well-formed domain.
   */
  readonly plan: (domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups) => FlavorPlan;
  /**
   * What still routes the ACME HTTP-01 challenge of a domain that is otherwise not routed (empty
   * when no challenge Service is configured); undefined: the Ingress-based one
   * (flavor-plan.ts `ingressChallengeOnly`).
   */
  readonly challengeOnly?: (domain: CustomDomain, options: RoutingOptions) => KubernetesObject[];
  /**
   * The objects of the data plane's own API this flavor could write for a domain, by name: deleted
   * when the domain goes or another flavor is chosen (routing/plan.ts `ownedRoutingObjects`).
   */
  readonly ownedObjects?: (domain: Pick<CustomDomain, 'metadata'>) => ObjectHeader[];
  /**
   * A kind the API server must serve for the flavor to write anything (`lookups.flavorKindServed`),
   * and the plan when it does not.
   */
  readonly requiredKind?: {
    readonly apiVersion: string;
    readonly kind: string;
    readonly unserved: (domain: CustomDomain) => FlavorPlan;
  };
  /** The plan reads `lookups.tlsSecretReady` (the routing phase looks it up only then). */
  readonly needsTlsSecretReady?: boolean;
  /**
   * An object of the data plane's own API (`kind`) that the flavor's Ingress names, and that the
   * data plane reads apart from the Ingress and acknowledges in no status (Traefik's Middleware): the
   * routing phase writes the objects after it in the plan only `ms` milliseconds after it was
   * written, and deletes one no longer wanted only `ms` after the domain's last write, so that the
   * data plane never has the Ingress name one it has not loaded or has dropped.
   */
  readonly referenceSettle?: { readonly kind: string; readonly ms: number };
}

/**
 * What a Project's auto-generated subdomain is routed to (docs/customdomains.md, "The auto-generated
 * subdomain"): controllers/project/subdomain.ts decides it, the flavor's `SubdomainRouteWriter`
 * writes it.
 */
export interface SubdomainRouteInput {
  /**
   * The metadata of every object the writer makes (suffixes appended to `name` where it makes more
   * than one of a kind): name `portico-subdomain-<project>`, the project's namespace, its labels and
   * the controller ownerReference to the Project.
   */
  readonly metadata: V1ObjectMeta & { name: string; namespace: string };
  /** `<label>.<apps domain>`, lowercase. */
  readonly hostname: string;
  /** The project's Service (`spec.service`), its port as a number. */
  readonly service: { readonly name: string; readonly port: number };
  /** Set when the subdomain answers with this redirect (Replace mode, the primary Live). */
  readonly redirect?: RedirectIntent | undefined;
  /**
   * The wildcard certificate's Secret (in the operator's namespace) once it holds a certificate;
   * undefined before: the route is written without naming it where naming it would break the route.
   */
  readonly certificate: { readonly namespace: string; readonly name: string } | undefined;
  readonly options: RoutingOptions;
}

/**
 * How one flavor (an ingress flavor's data plane module, or Gateway API mode in routing/) writes a
 * Project's auto-generated subdomain (`src/data-planes/<name>/subdomain-route.ts`). Pure.
 */
export interface SubdomainRouteWriter {
  readonly flavor: RoutingFlavor;
  /**
   * The objects for the subdomain, in apply order, and `what` answers it (for status messages,
   * e.g. `Ingress portico-subdomain-site (Traefik)`). Never throws.
   */
  readonly plan: (input: SubdomainRouteInput) => { apply: KubernetesObject[]; what: string };
  /**
   * Every object `plan` could write for a Project with this metadata, by name: deleted when not
   * planned (the project goes, its subdomain stops, or the operator runs with another flavor).
   */
  readonly owned: (metadata: { name: string; namespace: string }) => ObjectHeader[];
  /**
   * How the data plane presents the wildcard certificate for the subdomains, in one sentence for
   * docs and messages (e.g. "Contour reads the Secret through TLSCertificateDelegation ...").
   */
  readonly certificateSource: string;
  /**
   * The one object, in the wildcard Secret's namespace, that lets the data plane use the Secret for
   * the routes of `namespaces` (those that hold a subdomain, sorted): Contour's
   * TLSCertificateDelegation, Traefik's TLSStore, Gateway API mode's ListenerSet (whose HTTPS
   * listener for `*.<apps domain>` presents it). `context`: the apps domain and the operator's
   * routing settings. Undefined: the flavor needs none. Where its kind is one the data plane
   * acknowledges (a ListenerSet), the subdomain serves only once the data plane took it too.
   */
  readonly certificateAccess?: (
    secret: { readonly namespace: string; readonly name: string },
    namespaces: readonly string[],
    context: { readonly appsDomain: string; readonly options: RoutingOptions },
  ) => KubernetesObject;
}

/** One cell of the data plane × flavor table (docs/routing.md, "Data planes and flavors"). */
export interface FlavorSupport {
  /** A serving domain's objects are taken and its hostname is routed to the Service over HTTPS. */
  readonly serves: boolean;
  /** A redirect domain answers with the redirect (the status as docs/routing.md says per flavor). */
  readonly redirects: boolean;
  /** Why not, when either is false: what the data plane does with the flavor's objects. */
  readonly why?: string;
}

/** The cell of a flavor a data plane module does not list (`DataPlaneModule.flavors`). */
export function notTaken(flavor: RoutingFlavor): FlavorSupport {
  return {
    serves: false,
    redirects: false,
    why: `it does not read the objects of the ${flavor} flavor`,
  };
}

/** The cell of `flavor` in `module`'s row: its own, else `notTaken`. */
export function flavorSupport(
  module: Pick<DataPlaneModule, 'flavors'>,
  flavor: RoutingFlavor,
): FlavorSupport {
  return module.flavors[flavor] ?? notTaken(flavor);
}

/** What the routing phase knows when it asks whether the data plane took one applied object. */
export interface AcknowledgementContext {
  /** The object as Portico applied it (its spec: e.g. an HTTPRoute's parentRefs). */
  readonly applied: KubernetesObject;
  /** The object as the operator's cache holds it, status included; undefined: not cached yet. */
  readonly cached: KubernetesObject | undefined;
  readonly name: string;
  readonly namespace: string;
  /** The operator's `--ingress-class-name`. */
  readonly ingressClassName: string | undefined;
  /** The operator's `--data-plane-name` (its default is the declared data plane's `displayName`). */
  readonly dataPlaneName: string | undefined;
}

/**
 * A kind of routing object Portico writes or reads as a route: how the data plane acknowledges it,
 * and how a foreign one (not Portico's) names hostnames (routing/foreign-routes.ts).
 */
export interface RouteKind {
  readonly apiVersion: string;
  readonly kind: string;
  /** The resource's plural (its collection path). */
  readonly plural: string;
  /**
   * From a CRD the cluster may not have: watched (owned, and foreign when `foreignRoute` is set)
   * only where the API server serves it. false: a built-in kind, always watched.
   */
  readonly crd: boolean;
  /**
   * Whether the data plane took an applied object of this kind, from its cached status. Undefined:
   * nothing acknowledges this kind (e.g. a Traefik Middleware, which carries no status).
   */
  readonly acknowledge?: (context: AcknowledgementContext) => Acknowledgement;
  /**
   * Who reports on an object of this kind, for the message while an object written in this pass
   * is awaited (its cached status is of the previous generation). Undefined: the status carries no
   * generation (an Ingress's address), so it is judged at once.
   */
  readonly reporter?: (dataPlaneName: string | undefined) => string;
  /** Set when an object of this kind that Portico does not own can take a claimed hostname's traffic. */
  readonly foreignRoute?: ForeignRouteReader;
  /**
   * Whether an object of this kind at a name Portico uses, without a controller ownerReference to
   * the domain, is someone else's and never overwritten or deleted, whatever its labels say
   * (controllers/customdomain/object-holder.ts `foreignKind`).
   */
  readonly ownedByReferenceOnly?: boolean;
}

/** How a foreign route of one kind names hostnames (routing/foreign-routes.ts). */
export interface ForeignRouteReader {
  /** The hostnames `spec` names, unnormalized and unfiltered (wildcards included); never throws. */
  readonly hostnames: (spec: Record<string, unknown>) => string[];
  /** The trimmed spec the foreign-route cache keeps: `hosts` (normalized), the class field if any. */
  readonly slimSpec: (hosts: readonly string[], classField: { ingressClassName?: string }) => unknown;
  /** Whether the kind has an ingress class (`routeClassOf`); false: it always counts (an HTTPRoute). */
  readonly classed: boolean;
}

/** How a data plane picks the Ingresses and its own routes it serves by class. */
export interface IngressClassRules {
  /** An annotation of its own that names the class, read before `kubernetes.io/ingress.class`. */
  readonly annotation?: string;
  /**
   * The class it serves when run without a class flag, together with objects that name no class:
   * an operator whose `--ingress-class-name` is this class counts classless foreign routes.
   */
  readonly defaultClassServesClassless?: string;
}

/**
 * One data plane: what the operator knows of it (`--data-plane <name>`). A new data plane is a
 * folder `src/data-planes/<name>/` exporting one of these, plus one line in `registry.ts`.
 */
export interface DataPlaneModule<Name extends string = string> {
  /** The value of `--data-plane`. */
  readonly name: Name;
  /** Its name in condition messages (the default of `--data-plane-name`). */
  readonly displayName: string;
  /** The flavor it serves and redirects with. */
  readonly workingFlavor: RoutingFlavor;
  /** The operator flags that select `workingFlavor` for it. */
  readonly workingFlags: string;
  /**
   * The objects it takes: for each flavor Portico can write, whether it serves and redirects. A
   * flavor it does not list is neither served nor redirected (`notTaken`), so that a flavor a new
   * data plane brings needs no cell in the other modules; each of today's modules lists them all.
   */
  readonly flavors: Readonly<Partial<Record<RoutingFlavor, FlavorSupport>>>;
  /** The ingress flavor it brings, of its own annotations or API; undefined: it brings none. */
  readonly flavorWriter?: FlavorWriter;
  /**
   * How its flavor (`subdomainRoute.flavor`, the one `flavorWriter` brings) writes a Project's
   * auto-generated subdomain; undefined: it brings none.
   */
  readonly subdomainRoute?: SubdomainRouteWriter;
  /**
   * The kinds of its own API that Portico writes or reads as routes (the Ingress and Gateway API
   * kinds are shared: `route-kinds.ts`).
   */
  readonly routeKinds: readonly RouteKind[];
  /** How it reads ingress classes; undefined: by `kubernetes.io/ingress.class` and `spec.ingressClassName` only. */
  readonly ingressClass?: IngressClassRules;
  /**
   * How RateLimitPolicy targets attach to its routes: the operator flag that turns it on and the
   * target kinds; undefined: Portico attaches none (the rate-limit service is reached otherwise).
   * The attacher itself (I/O) is its folder's `attacher.ts`, registered in `attacher-registry.ts`.
   */
  readonly rateLimitAttachment?: RateLimitAttachment;
}

/** How a data plane's routes take RateLimitPolicy targets (`DataPlaneModule.rateLimitAttachment`). */
export interface RateLimitAttachment {
  /** The operator flag that turns the attachment on or off (e.g. `--contour-attachment`). */
  readonly flag: `--${string}-attachment`;
  /** The flag's environment variable (e.g. `PORTICO_CONTOUR_ATTACHMENT`). */
  readonly env: string;
  /** Whether it is on when the flag is not given. */
  readonly defaultOn: boolean;
  /** The flag's help line (`portico controller --help`). */
  readonly help: string;
  /** The `spec.targetRefs` kinds it wires, by API group and kind. */
  readonly targets: readonly { readonly group: string; readonly kind: string }[];
  /** It reads `--cluster-domain` (checked only while it is on). */
  readonly usesClusterDomain?: boolean;
}

/**
 * Where the data plane's proxies find the rate-limit service, and the request headers the
 * descriptors read: the `--ratelimit-*` flags (controller/config.ts), the same for every attacher.
 */
export interface RateLimitWiring {
  readonly headers: RateLimitHeaders;
  /** The rate-limit server's Service and how long a proxy waits for it. */
  readonly extensionService: {
    /** The operator's namespace: where the Service and Contour's ExtensionService live. */
    readonly namespace: string;
    /** The ExtensionService's name (`--ratelimit-extension-service`). */
    readonly name: string;
    readonly serviceName: string;
    /** The Service's gRPC port. */
    readonly servicePort: number;
    /** How long the proxy waits for an answer, milliseconds. */
    readonly timeoutMs: number;
  };
  /** The cluster's DNS domain (`--cluster-domain`), checked when an attacher on reads it. */
  readonly clusterDomain: string;
}

/** One target's verdict, a part of the RateLimitPolicy's `Attached` condition. */
export interface TargetVerdict {
  readonly ref: PolicyTargetRef;
  readonly wired: boolean;
  /** Not wired yet, for a reason that passes by itself (the data plane has not reported yet). */
  readonly pending?: boolean;
  readonly reason: RateLimitAttachedReason;
  readonly message: string;
}

/** What an attacher answers for one policy (`RateLimitAttacher.attach`). */
export type AttachResult =
  | {
      /** The verdicts of the policy's targets of its kinds, by `targetKey`. */
      readonly verdicts: ReadonlyMap<string, TargetVerdict>;
      /** Look at the policy again this soon, milliseconds (its data plane has not reported yet). */
      readonly requeueAfterMs?: number;
    }
  | {
      /**
       * It cannot judge yet (its watch has not listed): the policy's `Attached` is Unknown,
       * `TargetsNotRead`, with this message; it queues the policies again once it can.
       */
      readonly notRead: string;
    };

/** What the RateLimitPolicy controller gives an attacher it creates. */
export interface RateLimitAttacherContext {
  readonly kubeConfig: KubeConfig;
  readonly objects: KubernetesObjectApi;
  readonly log: Logger;
  /** Milliseconds between the controller's full resyncs. */
  readonly resyncMs: number;
  readonly wiring: RateLimitWiring;
  /** The controller's cache of RateLimitPolicies: `list` (every namespace when undefined), `get` by `namespace/name`. */
  readonly policies: {
    list(namespace?: string): readonly RateLimitPolicy[];
    get(key: string): RateLimitPolicy | undefined;
  };
  /** Queues a key: a policy's `namespace/name`, or one of the attacher's own keys. */
  readonly enqueue: (key: string) => void;
}

/**
 * A data plane's rate-limit attacher (I/O, its folder's `attacher.ts`): the RateLimitPolicy
 * controller creates one for each data plane whose attachment flag is on, and calls it beside its
 * own work (controllers/ratelimitpolicy/controller.ts).
 */
export interface RateLimitAttacher {
  /** Starts its watches; never throws. */
  start(): void;
  stop(): Promise<void>;
  /** Its own queue keys that are queued at start and at every resync (never a `namespace/name`). */
  readonly resyncKeys: readonly string[];
  /** Whether `key` is one of its own queue keys (never a policy's `namespace/name`). */
  ownsKey(key: string): boolean;
  /** Reconciles one of its keys; returns when to look again, milliseconds, if due. */
  reconcileKey(key: string): Promise<number | undefined>;
  /** Wires the targets of `policy` of its kinds and says how each stands. */
  attach(policy: RateLimitPolicy): Promise<AttachResult>;
  /**
   * After a policy's reconcile (`policy` undefined: it is gone): takes away what it wrote for
   * targets the policy no longer names, or queues that work.
   */
  settle(namespace: string, name: string, policy: RateLimitPolicy | undefined): Promise<void>;
}

/** A data plane's attacher as `attacher-registry.ts` lists it. */
export interface RateLimitAttacherModule {
  /** The data plane module whose `rateLimitAttachment` it implements. */
  readonly dataPlane: DataPlaneModule;
  /** The verdict of one of its targets while its flag is off. */
  readonly disabledVerdict: (ref: PolicyTargetRef) => TargetVerdict;
  /** Creates the attacher (its flag is on). */
  readonly create: (context: RateLimitAttacherContext) => RateLimitAttacher;
}

/** The queue-and-verdict key of a target: `group/kind/name`. */
export function targetKey(ref: {
  readonly group: string;
  readonly kind: string;
  readonly name: string;
}): string {
  return `${ref.group}/${ref.kind}/${ref.name}`;
}

/** Declares a data plane with its name as a literal type (so the registry's names form a union). */
export function defineDataPlane<const Name extends string>(
  module: DataPlaneModule<Name>,
): DataPlaneModule<Name> {
  return module;
}

/** Whether `ref` (a RateLimitPolicy target) is one of `module`'s rate-limit attachment targets. */
export function isAttachmentTarget(
  module: Pick<DataPlaneModule, 'rateLimitAttachment'>,
  ref: { readonly group: string; readonly kind: string },
): boolean {
  return (module.rateLimitAttachment?.targets ?? []).some(
    (t) => t.group === ref.group && t.kind === ref.kind,
  );
}
