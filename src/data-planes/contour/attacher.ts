/**
 * Contour's rate-limit attacher (`--contour-attachment`; docs/ratelimits.md, "Attaching to Contour"),
 * the I/O of attaching RateLimitPolicies to Contour (controllers/ratelimitpolicy/attachment.ts has
 * the decisions): a watch of
 * every HTTPProxy, the server-side applies of each policy's descriptors under the policy's own field
 * manager (never forced), the empty applies that take them away again, and the ExtensionService.
 *
 * The HTTPProxy cache drops managedFields like every cache here (informer.ts); the managers of
 * Portico's fields (`portico-ratelimit/<policy>`) are noted as each object arrives, so the operator
 * knows where its fields are without a live read.
 */
import { type KubeConfig, type KubernetesObjectApi } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { FIELD_MANAGER } from '../../api/customdomain.js';
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { apiStatusCode, isNotFound } from '../../kube/errors.js';
import { ResilientInformer } from '../../kube/informer.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import {
  attachmentFieldManager,
  attachmentManagersOn,
  CONTOUR_GROUP,
  contourDescriptors,
  extensionServiceApply,
  httpProxyApply,
  httpProxyRelease,
  HTTPPROXY_PLURAL,
  isSupportedTarget,
  targetsOf,
  targetVerdict,
  trimProxy,
  type AttachmentHeaders,
  type ExtensionServiceOptions,
  type HTTPProxy,
  type TargetOutcome,
  type TargetVerdict,
} from '../../controllers/ratelimitpolicy/attachment.js';
import {
  targetKey,
  type AttachResult,
  type RateLimitAttacher,
  type RateLimitAttacherContext,
  type RateLimitAttacherModule,
} from '../types.js';
import { contour } from './index.js';

/** The controller's Contour settings (its flags). */
export interface ContourAttachmentOptions {
  readonly headers: AttachmentHeaders;
  readonly extensionService: ExtensionServiceOptions;
}

/** Thrown when the HTTPProxy changed after it was judged (its resourceVersion): judge it again. */
export class StaleTargetError extends Error {
  readonly code = 409;
  constructor(target: string) {
    super(`HTTPProxy ${target} changed while it was being applied; judging it again`);
    this.name = 'StaleTargetError';
  }
}

/**
 * The message of the API server's Status in an error (at most 1024 characters), and whether it is a
 * server-side apply field manager conflict (a cause with reason `FieldManagerConflict`).
 */
export function apiFailure(err: unknown): { message: string; fieldConflict: boolean } {
  const body = (err as { body?: unknown }).body;
  let status:
    { message?: unknown; details?: { causes?: { reason?: unknown; type?: unknown }[] } } | undefined;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body) as typeof status;
    } catch {
      status = undefined;
    }
  } else if (typeof body === 'object' && body !== null) {
    status = body;
  }
  const message =
    typeof status?.message === 'string' ? status.message : err instanceof Error ? err.message : String(err);
  // kube-apiserver v1.37 puts it in `reason` (metav1.CauseType), older clients read `type`.
  const fieldConflict = (status?.details?.causes ?? []).some(
    (c) => c.reason === 'FieldManagerConflict' || c.type === 'FieldManagerConflict',
  );
  return { message: message.slice(0, 1024), fieldConflict };
}

/** The descriptors an HTTPProxy has (undefined when none). */
function descriptorsOf(proxy: HTTPProxy): unknown {
  const policy = proxy.spec?.virtualhost?.rateLimitPolicy as
    { global?: { descriptors?: unknown } } | undefined;
  return policy?.global?.descriptors;
}

export class ContourAttacher {
  readonly #objects: KubernetesObjectApi;
  readonly #options: ContourAttachmentOptions;
  readonly #log: Logger;
  readonly #proxies: ResilientInformer<HTTPProxy>;
  /** The managers of Portico's fields on each HTTPProxy, by `namespace/name`. */
  readonly #managers = new Map<string, readonly string[]>();
  /** The HTTPProxies have been listed once (`listed`). */
  #listed = false;
  /** The ExtensionService API was found not served, and said so. */
  #warnedNotServed = false;

  /**
   * @param onProxy called for every add, update and delete of an HTTPProxy, after its managers are noted
   */
  constructor(o: {
    kubeConfig: KubeConfig;
    objects: KubernetesObjectApi;
    options: ContourAttachmentOptions;
    log: Logger;
    resyncMs: number;
    onProxy: (proxy: HTTPProxy, verb: 'add' | 'update' | 'delete') => void;
  }) {
    this.#objects = o.objects;
    this.#options = o.options;
    this.#log = o.log;
    this.#proxies = new ResilientInformer<HTTPProxy>(o.kubeConfig, {
      path: `/apis/${CONTOUR_GROUP}/v1/${HTTPPROXY_PLURAL}`,
      inspect: (proxy) => {
        if (proxy.metadata.managedFields === undefined) return;
        const key = `${proxy.metadata.namespace}/${proxy.metadata.name}`;
        const managers = attachmentManagersOn(proxy);
        if (managers.length === 0) this.#managers.delete(key);
        else this.#managers.set(key, managers);
      },
      keep: trimProxy,
      onChange: (proxy, verb) => {
        if (verb === 'delete') this.#managers.delete(`${proxy.metadata.namespace}/${proxy.metadata.name}`);
        o.onProxy(proxy, verb);
      },
      resyncMs: 0,
      log: o.log,
    });
  }

  /**
   * True once the HTTPProxies have been listed, and from then on: a watch being restarted keeps the
   * cache it had (it lists again), so verdicts keep reading it rather than turning Unknown meanwhile.
   */
  get listed(): boolean {
    if (!this.#listed && this.#proxies.synced) this.#listed = true;
    return this.#listed;
  }

  start(): void {
    this.#proxies.start();
  }

  async stop(): Promise<void> {
    await this.#proxies.stop();
  }

  /** The managers of Portico's fields on an HTTPProxy (from the cache). */
  managersOn(namespace: string, name: string): readonly string[] {
    return this.#managers.get(`${namespace}/${name}`) ?? [];
  }

  /** The cached HTTPProxies of a namespace that carry fields of `manager`. */
  proxiesWithManager(namespace: string, manager: string): string[] {
    const prefix = `${namespace}/`;
    const out: string[] = [];
    for (const [key, managers] of this.#managers) {
      if (key.startsWith(prefix) && managers.includes(manager)) out.push(key.slice(prefix.length));
    }
    return out;
  }

  /** The cached HTTPProxy, or undefined. */
  proxy(namespace: string, name: string): HTTPProxy | undefined {
    return this.#proxies.get(name, namespace);
  }

  /**
   * Wires every HTTPProxy target of `policy` and returns a verdict for each, in order. An apply the API server
   * refuses for a field conflict, or any other reason, is a verdict, not an error.
   *
   * @throws StaleTargetError when an HTTPProxy changed after it was read from the cache (retry soon)
   */
  async attach(policy: RateLimitPolicy): Promise<TargetVerdict[]> {
    const verdicts: TargetVerdict[] = [];
    for (const ref of targetsOf(policy).filter(isSupportedTarget)) {
      verdicts.push(targetVerdict(ref, await this.#wire(policy, ref.name), policy.metadata.namespace));
    }
    return verdicts;
  }

  async #wire(policy: RateLimitPolicy, name: string): Promise<TargetOutcome> {
    const namespace = policy.metadata.namespace;
    const cached = this.#proxies.get(name, namespace);
    if (cached === undefined) return { kind: 'notFound' };
    if (cached.spec?.virtualhost === undefined) return { kind: 'notRoot' };
    const manager = attachmentFieldManager(policy.metadata.name);
    const desired = contourDescriptors(policy, this.#options.headers);
    if (
      this.managersOn(namespace, name).includes(manager) &&
      isDeepStrictEqual(descriptorsOf(cached), desired)
    ) {
      // Already ours and as desired (the cache says so): no write, e.g. after Contour's status update.
      return { kind: 'applied', proxy: cached };
    }
    const body = httpProxyApply(
      policy,
      { name, resourceVersion: cached.metadata.resourceVersion ?? '' },
      this.#options.headers,
    );
    try {
      const applied = await serverSideApply(this.#objects, body, { fieldManager: manager, force: false });
      return { kind: 'applied', proxy: applied };
    } catch (err: unknown) {
      return this.#failed(err, `${namespace}/${name}`);
    }
  }

  #failed(err: unknown, target: string): TargetOutcome {
    if (isNotFound(err)) return { kind: 'notFound' };
    const failure = apiFailure(err);
    if (apiStatusCode(err) === 409) {
      if (failure.fieldConflict) return { kind: 'conflict', message: failure.message };
      throw new StaleTargetError(target);
    }
    this.#log.warn({ httpProxy: target, err: failure.message }, 'rate-limit descriptors not applied');
    return { kind: 'applyFailed', message: failure.message };
  }

  /**
   * Removes the fields `manager` owns on an HTTPProxy (an empty apply under that manager), never the
   * HTTPProxy. Nothing to do when it is gone.
   *
   * @throws StaleTargetError when the HTTPProxy changed after it was read from the cache
   * @throws the API error when the apply fails otherwise (retry with backoff)
   */
  async release(namespace: string, name: string, manager: string): Promise<void> {
    const cached = this.#proxies.get(name, namespace);
    if (cached === undefined) return;
    const body = httpProxyRelease({
      namespace,
      name,
      resourceVersion: cached.metadata.resourceVersion ?? '',
    });
    let applied: HTTPProxy;
    try {
      applied = await serverSideApply(this.#objects, body, { fieldManager: manager, force: false });
    } catch (err: unknown) {
      if (isNotFound(err)) return;
      if (apiStatusCode(err) === 409) throw new StaleTargetError(`${namespace}/${name}`);
      throw err;
    }
    if (cached.metadata.uid !== undefined && applied.metadata.uid !== cached.metadata.uid) {
      await this.#undoCreate(applied);
      return;
    }
    this.#log.info({ httpProxy: `${namespace}/${name}`, manager }, 'rate-limit descriptors removed');
  }

  /**
   * Deletes the empty HTTPProxy an empty apply created because the one it was meant for was deleted
   * after it was read (an apply creates what is missing, whatever its resourceVersion, where the
   * operator may create HTTPProxies: the Contour routing flavor needs it). Only that object: its uid
   * is the precondition.
   */
  async #undoCreate(created: HTTPProxy): Promise<void> {
    const { namespace, name, uid } = created.metadata;
    try {
      await this.#objects.delete(created, undefined, undefined, undefined, undefined, undefined, {
        preconditions: uid === undefined ? {} : { uid },
      });
    } catch (err: unknown) {
      if (!isNotFound(err) && apiStatusCode(err) !== 409) throw err;
    }
    this.#log.warn(
      { httpProxy: `${namespace}/${name}` },
      'an HTTPProxy deleted while its rate-limit descriptors were being removed was re-created empty by the apply; deleted it again',
    );
  }

  /**
   * Applies the ExtensionService (Portico owns it: forced, under the operator's field manager).
   *
   * @returns false when the API server does not serve ExtensionServices (Contour's CRDs are not
   *   installed, yet): logged as a warning the first time, then at debug level; the caller tries again
   * @throws the API error of a failed apply otherwise (retry with backoff)
   */
  async applyExtensionService(): Promise<boolean> {
    const o = this.#options.extensionService;
    try {
      await serverSideApply(this.#objects, extensionServiceApply(o), {
        fieldManager: FIELD_MANAGER,
        force: true,
      });
    } catch (err: unknown) {
      const message = apiFailure(err).message;
      if (!isNotFound(err) && !/unrecognized|not found|could not find/i.test(message)) throw err;
      const level = this.#warnedNotServed ? 'debug' : 'warn';
      this.#warnedNotServed = true;
      this.#log[level](
        { extensionService: `${o.namespace}/${o.name}`, err: message },
        "Contour's ExtensionService API is not served: is Contour installed? (or run with --contour-attachment=false)",
      );
      return false;
    }
    this.#warnedNotServed = false;
    this.#log.info(
      { extensionService: `${o.namespace}/${o.name}`, service: `${o.serviceName}:${o.servicePort}` },
      'rate-limit ExtensionService applied',
    );
    return true;
  }
}

/** The queue key of the ExtensionService. */
const EXTENSION_SERVICE_KEY = 'extensionservice';
/** The prefix of an HTTPProxy's sweep key (`httpproxy:<namespace>/<name>`); ':' is in no namespace. */
const PROXY_KEY_PREFIX = 'httpproxy:';
/** How often it looks whether the HTTPProxies have been listed, until they have. */
const PROXIES_LISTED_POLL_MS = 1_000;
/** How soon the ExtensionService is applied again while the API server does not serve the kind. */
const EXTENSION_SERVICE_RETRY_MS = 60_000;

/** `namespace/name` of an object. */
function keyOf(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/**
 * The RateLimitPolicy controller's side of Contour: a change of an HTTPProxy queues the policies
 * that target it; an `httpproxy:<namespace>/<name>` key removes the fields of policies that no
 * longer target it (deleted, or the target taken out of the list); the `extensionservice` key
 * applies the ExtensionService Contour's config names (at start and every resync). The HTTPProxy
 * watch does not hold back the controller: without Contour's CRD the rest still runs, and targeted
 * policies say so (Attached=Unknown, TargetsNotRead) until the HTTPProxies are listed, when every
 * policy with targets is queued again.
 */
class ContourRateLimitAttacher implements RateLimitAttacher {
  readonly resyncKeys = [EXTENSION_SERVICE_KEY];
  readonly #c: RateLimitAttacherContext;
  readonly #contour: ContourAttacher;
  /** Looks whether the HTTPProxies have been listed, until they have. */
  #listedPoll: NodeJS.Timeout | undefined;

  constructor(context: RateLimitAttacherContext) {
    this.#c = context;
    this.#contour = new ContourAttacher({
      kubeConfig: context.kubeConfig,
      objects: context.objects,
      options: { headers: context.wiring.headers, extensionService: context.wiring.extensionService },
      log: context.log,
      resyncMs: context.resyncMs,
      onProxy: (proxy) => {
        this.#onProxy(proxy);
      },
    });
  }

  start(): void {
    this.#contour.start();
    // One timer, not one per policy: their Attached was Unknown until the HTTPProxies are listed.
    this.#listedPoll = setInterval(() => {
      if (!this.#contour.listed) return;
      clearInterval(this.#listedPoll);
      for (const p of this.#c.policies.list())
        if (targetsOf(p).length > 0) this.#c.enqueue(keyOf(p.metadata.namespace, p.metadata.name));
    }, PROXIES_LISTED_POLL_MS);
    this.#listedPoll.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#listedPoll);
    await this.#contour.stop();
  }

  ownsKey(key: string): boolean {
    return key === EXTENSION_SERVICE_KEY || key.startsWith(PROXY_KEY_PREFIX);
  }

  /** Applies the ExtensionService (while Contour's CRDs are not installed, again in a minute), or sweeps an HTTPProxy. */
  async reconcileKey(key: string): Promise<number | undefined> {
    if (key === EXTENSION_SERVICE_KEY) {
      const served = await this.#contour.applyExtensionService();
      return served ? undefined : EXTENSION_SERVICE_RETRY_MS;
    }
    await this.#sweepProxy(key.slice(PROXY_KEY_PREFIX.length));
    return undefined;
  }

  async attach(policy: RateLimitPolicy): Promise<AttachResult> {
    if (!this.#contour.listed && targetsOf(policy).some(isSupportedTarget)) {
      return {
        notRead: `the operator has not listed HTTPProxies yet (is Contour's HTTPProxy CRD installed, and may the operator list them?)`,
      };
    }
    const verdicts = await this.#contour.attach(policy);
    return { verdicts: new Map(verdicts.map((v) => [targetKey(v.ref), v])) };
  }

  /** Queues the sweep of each HTTPProxy of the policy's namespace that carries its fields and that it no longer targets. */
  settle(namespace: string, name: string, policy: RateLimitPolicy | undefined): Promise<void> {
    const targeted = new Set(
      policy === undefined
        ? []
        : targetsOf(policy)
            .filter(isSupportedTarget)
            .map((r) => r.name),
    );
    for (const proxy of this.#contour.proxiesWithManager(namespace, attachmentFieldManager(name))) {
      if (!targeted.has(proxy)) this.#c.enqueue(`${PROXY_KEY_PREFIX}${keyOf(namespace, proxy)}`);
    }
    return Promise.resolve();
  }

  /** Queues the policies that target the HTTPProxy, and its sweep when Portico has fields on it. */
  #onProxy(proxy: HTTPProxy): void {
    const { namespace, name } = proxy.metadata;
    for (const p of this.#c.policies.list(namespace)) {
      if (targetsOf(p).some((r) => isSupportedTarget(r) && r.name === name))
        this.#c.enqueue(keyOf(namespace, p.metadata.name));
    }
    if (this.#contour.managersOn(namespace, name).length > 0) {
      this.#c.enqueue(`${PROXY_KEY_PREFIX}${keyOf(namespace, name)}`);
    }
  }

  /**
   * Removes from one HTTPProxy the fields of every policy that no longer targets it (deleted, the
   * target taken out of its list, or the HTTPProxy no longer a root proxy).
   */
  async #sweepProxy(proxyKey: string): Promise<void> {
    const slash = proxyKey.indexOf('/');
    const namespace = proxyKey.slice(0, slash);
    const name = proxyKey.slice(slash + 1);
    const proxy = this.#contour.proxy(namespace, name);
    if (proxy === undefined) return;
    const wanted = new Set(
      proxy.spec?.virtualhost === undefined
        ? []
        : this.#c.policies
            .list(namespace)
            .filter((p) => targetsOf(p).some((r) => isSupportedTarget(r) && r.name === name))
            .map((p) => attachmentFieldManager(p.metadata.name)),
    );
    for (const manager of this.#contour.managersOn(namespace, name)) {
      if (!wanted.has(manager)) await this.#contour.release(namespace, name, manager);
    }
  }
}

/** Contour's attacher, as attacher-registry.ts lists it. */
export const contourAttacher: RateLimitAttacherModule = {
  dataPlane: contour,
  disabledVerdict: (ref) => targetVerdict(ref, { kind: 'disabled' }, ''),
  create: (context) => new ContourRateLimitAttacher(context),
};
