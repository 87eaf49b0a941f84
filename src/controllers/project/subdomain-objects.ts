/**
 * The objects of the Projects' auto-generated subdomains in the cluster (docs/customdomains.md, "The
 * auto-generated subdomain"): each Project's route, as the flavor's writer plans it (subdomain.ts,
 * routing/subdomain-route.ts), applied, read back for the data plane's acknowledgement and deleted
 * when no longer planned; the one object that lets the data plane use the wildcard Secret (the
 * writer's `certificateAccess`, read back too where the data plane reports on it: gateway mode's
 * ListenerSet); and the foreign routes of the subdomains, from the CustomDomain
 * controller's route index. I/O: the Kubernetes API through `objects`; the decisions are
 * subdomain.ts's.
 */
import type { KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER } from '../../api/customdomain.js';
import { PROJECT_KIND, type Project, type ProjectSubdomainStatus } from '../../api/project.js';
import type { SubdomainRouteWriter } from '../../data-planes/types.js';
import { appsSubdomain } from '../../domain/apps-subdomain.js';
import { isNotFound } from '../../kube/errors.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import { ownerKey, routeNamespace } from '../../routing/foreign-routes.js';
import type { RoutingOptions } from '../../routing/options.js';
import type { ServicePortEntry } from '../../routing/plan.js';
import {
  acknowledgedKind,
  covers,
  everySubdomainObject,
  subdomainRouteName,
  subdomainRouteWriter,
} from '../../routing/subdomain-route.js';
import type { AppsCertificateState } from './apps-certificate.js';
import { planSubdomain, type SubdomainForeignRoutes } from './subdomain.js';

/**
 * The auto-generated subdomains (docs/customdomains.md, "The auto-generated subdomain"):
 * undefined when the operator runs without `--apps-domain`.
 */
export interface SubdomainOptions {
  /** The platform's apps domain, normalized. */
  readonly appsDomain: string;
  /** The wildcard certificate (apps-certificate.ts). */
  readonly certificate: { readonly state: AppsCertificateState; readonly secretReference: string };
  /** The deploy gate's, the port's and the foreign routes' reads (the CustomDomain controller's caches). */
  readonly view: {
    readyEndpoints(namespace: string, service: string): number;
    servicePorts(namespace: string, name: string): readonly ServicePortEntry[] | undefined;
    foreignRoutes?(hostname: string, owners: ReadonlySet<string>): string[];
    foreignRoutesUnder?(
      domain: string,
      owners: ReadonlySet<string>,
    ): { hostname: string; routes: string[] }[];
  };
  readonly objects: KubernetesObjectApi;
  /** The operator's namespace: the wildcard Secret and the certificate's access object live there. */
  readonly operatorNamespace: string;
  /** How the operator routes (mode, flavor, class, parent Gateways): chooses the writer. */
  readonly routing: RoutingOptions;
}

/** `apiVersion/kind/name`: an object of a subdomain route, whatever its namespace. */
function keyOf(object: KubernetesObject): string {
  return `${object.apiVersion ?? ''}/${object.kind ?? ''}/${object.metadata?.name ?? ''}`;
}

function controlledBy(object: KubernetesObject | undefined, uid: string | undefined): boolean {
  return object?.metadata?.ownerReferences?.some((r) => r.controller === true && r.uid === uid) === true;
}

/** The subdomain routes of the Projects, in the cluster. */
export class SubdomainRoutes {
  readonly #o: SubdomainOptions;
  readonly #log: Logger;
  readonly #writer: SubdomainRouteWriter;
  /** The namespaces the certificate's access object lists as last applied (sorted, joined). */
  #accessFor: string | undefined;
  /** The certificate's access object as last applied, when the data plane reports on its kind. */
  #accessApplied: KubernetesObject | undefined;
  /** Serializes the access object's applies across workers. */
  #access: Promise<void> = Promise.resolve();

  /** @throws Error when no writer routes the subdomain in the operator's flavor (a registry defect) */
  constructor(options: SubdomainOptions, log: Logger) {
    this.#o = options;
    this.#log = log;
    this.#writer = subdomainRouteWriter(options.routing);
  }

  /** The subdomain of the Project in `namespace`. */
  hostnameOf(namespace: string): string {
    return appsSubdomain(namespace, this.#o.appsDomain);
  }

  /**
   * The route of `project`'s subdomain applied as planned (subdomain.ts), the objects no longer
   * planned deleted. `heldBy`: the Project that has the subdomain when it is not this one.
   * `recheck`: the data plane has not reported on the route as applied yet.
   */
  async reconcile(
    project: Project,
    servingPrimary: string | undefined,
    heldBy: { namespace: string; name: string } | undefined,
  ): Promise<{ status: ProjectSubdomainStatus; recheck: boolean }> {
    const o = this.#o;
    const { namespace, uid } = project.metadata;
    const hostname = this.hostnameOf(namespace);
    const current = await this.#readAll(project);
    const [secretNamespace = '', secretName = ''] = o.certificate.secretReference.split('/');
    const plan = planSubdomain(project, {
      hostname,
      heldBy,
      writer: this.#writer,
      options: o.routing,
      dataPlaneName: o.routing.dataPlaneName,
      readyEndpoints: o.view.readyEndpoints(namespace, project.spec.service.name),
      servicePorts: o.view.servicePorts(namespace, project.spec.service.name),
      current: (object) => {
        const found = current.get(keyOf(object));
        return controlledBy(found, uid) ? found : undefined;
      },
      routedBefore: [...current.values()].some((obj) => controlledBy(obj, uid)),
      certificate: { ...o.certificate.state, secret: { namespace: secretNamespace, name: secretName } },
      servingPrimary,
      foreign: heldBy === undefined ? this.#foreignRoutes(project, hostname) : undefined,
      certificateAccess: await this.#accessNow(),
    });
    const planned = new Set(plan.apply.map(keyOf));
    for (const object of plan.apply) {
      const now = current.get(keyOf(object));
      if (controlledBy(now, uid) && now !== undefined && covers(now, object)) continue;
      await serverSideApply(o.objects, object, { fieldManager: FIELD_MANAGER, force: true });
      this.#log.info(
        { namespace, kind: object.kind, name: object.metadata?.name, hostname },
        'applied subdomain route',
      );
    }
    for (const [key, object] of current)
      if (!planned.has(key) && controlledBy(object, uid)) await this.#delete(object);
    return { status: plan.status, recheck: plan.awaiting };
  }

  /** Deletes the subdomain route of a gone (or going) Project (`uid` when known). */
  async sweep(namespace: string, name: string, uid: string | undefined): Promise<void> {
    const current = await this.#readAll({ metadata: { name, namespace } });
    for (const object of current.values()) {
      const owner = object.metadata?.ownerReferences?.find((r) => r.controller === true);
      if (owner?.kind === PROJECT_KIND && owner.name === name && (uid === undefined || owner.uid === uid))
        await this.#delete(object);
    }
  }

  /**
   * The writer's `certificateAccess` object (Contour's TLSCertificateDelegation, Traefik's TLSStore)
   * in the wildcard Secret's namespace, listing `namespaces` (those holding a subdomain); applied
   * when the list changed. Serialized.
   */
  applyCertificateAccess(namespaces: () => readonly string[]): Promise<void> {
    const access = this.#writer.certificateAccess;
    if (access === undefined) return Promise.resolve();
    const run = async (): Promise<void> => {
      const list = [...namespaces()].sort();
      const joined = list.join(',');
      if (joined === this.#accessFor) return;
      const [namespace = '', name = ''] = this.#o.certificate.secretReference.split('/');
      const object = access({ namespace, name }, list, {
        appsDomain: this.#o.appsDomain,
        options: this.#o.routing,
      });
      await serverSideApply(this.#o.objects, object, { fieldManager: FIELD_MANAGER, force: true });
      this.#accessFor = joined;
      this.#accessApplied = acknowledgedKind(object) ? object : undefined;
      this.#log.info({ kind: object.kind, namespaces: list }, 'applied the wildcard certificate access');
    };
    const next = this.#access.then(run);
    this.#access = next.catch(() => undefined);
    return next;
  }

  /**
   * The certificate's access object as last applied and as the API server holds it now, when the
   * data plane reports on its kind (gateway mode's ListenerSet); undefined otherwise.
   */
  async #accessNow(): Promise<
    { planned: KubernetesObject; current: KubernetesObject | undefined } | undefined
  > {
    const planned = this.#accessApplied;
    if (planned === undefined) return undefined;
    return { planned, current: await this.#read(planned) };
  }

  /**
   * The routes Portico does not own for `project`'s subdomain: of its namespace, named; of others,
   * counted; and its namespace's routes for other names under the apps domain (docs/routing.md,
   * "Foreign routes"). Undefined when the view has no route index.
   */
  #foreignRoutes(project: Project, hostname: string): SubdomainForeignRoutes | undefined {
    const { view, appsDomain } = this.#o;
    if (view.foreignRoutes === undefined || view.foreignRoutesUnder === undefined) return undefined;
    const { namespace, uid = '' } = project.metadata;
    const owners = new Set([ownerKey(namespace, uid)]);
    const routes = view.foreignRoutes(hostname, owners);
    const here = routes.filter((r) => routeNamespace(r) === namespace);
    const strays = view
      .foreignRoutesUnder(appsDomain, owners)
      .filter((e) => e.hostname !== hostname)
      .flatMap((e) =>
        e.routes
          .filter((r) => routeNamespace(r) === namespace)
          .map((route) => ({ route, hostname: e.hostname })),
      );
    return { here, elsewhere: routes.length - here.length, strays };
  }

  /** Every object any writer could have written for the Project, as the API server holds it, by `keyOf`. */
  async #readAll(project: Pick<Project, 'metadata'>): Promise<Map<string, KubernetesObject>> {
    const metadata = { name: subdomainRouteName(project), namespace: project.metadata.namespace };
    const found = new Map<string, KubernetesObject>();
    for (const header of everySubdomainObject(metadata)) {
      const object = await this.#read(header);
      if (object !== undefined) found.set(keyOf(header), object);
    }
    return found;
  }

  /** The object, or undefined when it does not exist or its kind is not served. */
  async #read(header: KubernetesObject): Promise<KubernetesObject | undefined> {
    try {
      return await this.#o.objects.read({
        ...header,
        metadata: { ...header.metadata },
      } as KubernetesObject & {
        metadata: { name: string; namespace: string };
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (err instanceof Error && err.message.startsWith('Unrecognized API version and kind'))
        return undefined;
      throw err;
    }
  }

  async #delete(object: KubernetesObject): Promise<void> {
    try {
      await this.#o.objects.delete(object, undefined, undefined, undefined, undefined, undefined, {
        preconditions: { uid: object.metadata?.uid ?? '' },
      });
      this.#log.info(
        { namespace: object.metadata?.namespace, kind: object.kind, name: object.metadata?.name },
        'deleted subdomain route object',
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
