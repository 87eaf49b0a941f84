/**
 * A watch that survives errors: `@kubernetes/client-node` informers stop for good on an error
 * (its issues #596, #958, #1933, #3020), so this wrapper restarts them with exponential backoff and
 * jitter, and calls `onResync` on a jittered period so the controller re-queues every cached object
 * (level-triggered: a missed event is repaired by the next resync).
 *
 * `stop` leaves no watch open: client-node 2.0's ListWatch opens the watch when a list that was in
 * flight at `stop` returns, and its `stop` misses a watch request still being opened; such a
 * request is aborted as soon as it is open (`StopAwareWatch`), so a stopped process can exit.
 *
 * Cached objects carry no apply bookkeeping (dropped as they arrive, see `dropApplyBookkeeping`),
 * and none of whatever else the informer's `keep` trims; the values every object repeats (kinds,
 * condition types and reasons…) are one shared copy each (`shareCommonStrings`).
 */
import {
  ApiException,
  HttpMethod,
  ListWatch,
  RequestContext,
  Watch,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { fetch } from 'undici';
import { backoffDelayMs, type BackoffPolicy } from './backoff.js';
import { shareCommonStrings } from './shared-strings.js';

/**
 * One page of a paginated LIST (Kubernetes API concepts, "Retrieving large results sets in
 * chunks"): at most `limit` objects, from where `continue` (the previous page's
 * `metadata.continue`) left off.
 */
export interface ListPage {
  limit: number;
  continue?: string;
}

/** Objects per page of an informer's LIST: client-go's pager default. */
export const LIST_PAGE_SIZE = 500;

export interface ResilientInformerOptions<T extends KubernetesObject> {
  /** Watch path, e.g. `/apis/portico.dev/v1alpha1/customdomains`. */
  path: string;
  /**
   * Lists the objects: one page per call. A lister that honours `page` (sends `limit` and
   * `continue`) is read page by page until the API server returns no continue token, each page
   * trimmed before the next is asked for, so a list of 10,000 Secrets never holds 10,000 full
   * Secrets at once; a lister that ignores it returns everything in one page. Default: the
   * collection at `path` as plain JSON, with `labelSelector` and `fieldSelector` (`collectionLister`).
   */
  list?: (page: ListPage) => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  /** A field selector of the list and the watch, e.g. `metadata.name=portico-apps-domain-tls`. */
  fieldSelector?: string;
  /**
   * Reads each object as it arrives, before its apply bookkeeping (managedFields) is dropped, e.g. to
   * note which field managers own parts of it. Must not throw or keep the object. It may be handed an
   * object already trimmed (the list's objects pass the handlers again): one without managedFields
   * tells nothing new.
   */
  inspect?: (obj: T) => void;
  /**
   * Trims what the cache keeps of each object as it arrives (after managedFields are dropped), e.g.
   * a Secret's data once parsed. Mutates the object; must not throw.
   */
  keep?: (obj: T) => void;
  /**
   * Cached objects related to `obj` (its owner, the objects it owns; undefined when not cached), whose
   * copies of the short strings it repeats (a name, a UID, a hostname) it keeps instead of its own
   * (`shareCommonStrings`), so related caches hold one copy between them. Read only; must not throw.
   */
  alike?: (obj: T) => readonly (KubernetesObject | undefined)[];
  /** Called for add, update and delete. */
  onChange: (obj: T, verb: 'add' | 'update' | 'delete') => void;
  /** Called every `resyncMs` (±10 %) with every cached object. */
  onResync?: (objects: readonly T[]) => void;
  /** Milliseconds; 0 disables resync. */
  resyncMs: number;
  restartBackoff?: BackoffPolicy;
  log: Logger;
}

/** kubectl's client-side apply bookkeeping: a copy of the whole object as last applied, as JSON. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * Removes the apply bookkeeping from a cached object: `metadata.managedFields` (client-go's
 * informers drop it with a transform too) and kubectl's last-applied-configuration annotation (a
 * CustomDomain applied with `kubectl apply` carries its whole manifest again in it). Nothing here
 * reads either, they are often the largest part of an object, and at 10,000 domains each cache holds
 * 10,000 copies. Mutates `obj`: its `metadata` becomes a copy without them.
 */
export function dropApplyBookkeeping(obj: KubernetesObject): void {
  const metadata = obj.metadata;
  if (!metadata) return;
  const annotations = metadata.annotations;
  const lastApplied = annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations;
  if (metadata.managedFields === undefined && !lastApplied) return;
  // Copies without them, not `delete`: V8 keeps an object that lost a property in dictionary mode,
  // a hash table several times the size of the object (a 2,000-domain heap snapshot held 600 bytes
  // of properties per such ObjectMeta; docs/performance.md).
  const kept = without(metadata, 'managedFields');
  if (lastApplied) kept.annotations = without(annotations, LAST_APPLIED_ANNOTATION);
  obj.metadata = kept;
}

/** A copy of `obj` without property `key`, made property by property (so V8 keeps it fast). */
function without<T extends object>(obj: T, key: string): T {
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) if (k !== key) copy[k] = v;
  return copy as T;
}

/**
 * The whole list, read page by page (`ListPage`, `LIST_PAGE_SIZE` objects a page) until an answer
 * carries no continue token. Each page is trimmed (`trim`) as it arrives, before the next is asked
 * for; an object that `cached` already holds at the same resourceVersion is replaced by that copy
 * (ListWatch keeps its copy anyway), so a relist does not trim, e.g. parse, every object again.
 * The pages of one paginated list are one consistent snapshot: the result is the last answer with
 * every page's items. `pageSize` is the `limit` of each page (tests use a small one). Rejects with
 * the lister's error, e.g. 410 Gone for a continue token that expired (the informer then starts
 * over).
 */
export async function listInPages<T extends KubernetesObject>(
  list: (page: ListPage) => Promise<KubernetesListObject<T>>,
  trim: (obj: T) => void,
  cached: (name: string, namespace: string | undefined) => T | undefined,
  pageSize = LIST_PAGE_SIZE,
): Promise<KubernetesListObject<T>> {
  const items: T[] = [];
  let page: ListPage = { limit: pageSize };
  for (;;) {
    const answer = await list(page);
    for (const obj of answer.items) {
      const held = cached(obj.metadata?.name ?? '', obj.metadata?.namespace);
      const version = obj.metadata?.resourceVersion;
      if (held && version !== undefined && held.metadata?.resourceVersion === version) {
        items.push(held);
      } else {
        trim(obj);
        items.push(obj);
      }
    }
    const next = continueToken(answer);
    if (!next) return { ...answer, items };
    page = { limit: pageSize, continue: next };
  }
}

/**
 * The continue token of a list answer: `metadata._continue` in client-node's typed lists,
 * `metadata.continue` in the raw JSON of a custom resource list.
 */
function continueToken(answer: KubernetesListObject<KubernetesObject>): string | undefined {
  const metadata = answer.metadata as { _continue?: string; continue?: string } | undefined;
  return metadata?._continue ?? metadata?.continue;
}

/**
 * The collection path of a resource in every namespace: `/api/v1/secrets` for the core group,
 * `/apis/networking.k8s.io/v1/ingresses` for the others (`apiVersion` is `group/version` or `v1`;
 * `plural` is the resource name).
 */
export function collectionPath(apiVersion: string, plural: string): string {
  return apiVersion.includes('/') ? `/apis/${apiVersion}/${plural}` : `/api/${apiVersion}/${plural}`;
}

/**
 * A lister for `ResilientInformer.list`: GETs the pages asked for of the collection at `path` (the
 * path the informer watches, `collectionPath`) and answers the API server's JSON as parsed, the
 * same plain objects a watch event carries.
 *
 * Not client-node's typed lists: KubernetesObjectApi builds model objects whose arrays V8 allocates
 * for 17 elements when a list pushes the first one (a cached Ingress of a restarted operator held
 * 760 bytes of array slots for 5 one-element arrays, a Secret 150) and whose timestamps are Date
 * objects where a watched object has strings (docs/performance.md, sixth round). Its generic list
 * also read a custom resource list's `metadata` as an ObjectMeta, dropping `continue`.
 *
 * Uses the kubeconfig's credentials and connection pool (`applySecurityAuthentication`, as
 * client-node's Watch does). Rejects with client-node's ApiException (`code` the HTTP status, `body`
 * the answer's text) on an error answer, or with the fetch error.
 */
export function collectionLister<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  labelSelector?: string,
  fieldSelector?: string,
): (page: ListPage) => Promise<KubernetesListObject<T>> {
  return async (page) => {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const url = new URL(cluster.server + path);
    url.searchParams.set('limit', String(page.limit));
    if (page.continue !== undefined) url.searchParams.set('continue', page.continue);
    if (labelSelector !== undefined) url.searchParams.set('labelSelector', labelSelector);
    if (fieldSelector !== undefined) url.searchParams.set('fieldSelector', fieldSelector);
    const context = new RequestContext(url.toString(), HttpMethod.GET);
    context.setHeaderParam('Accept', 'application/json');
    await kubeConfig.applySecurityAuthentication(context);
    const dispatcher = context.getDispatcher();
    const response = await fetch(url, {
      method: 'GET',
      headers: context.getHeaders(),
      ...(dispatcher === undefined ? {} : { dispatcher }),
    });
    const text = await response.text();
    if (!response.ok) {
      throw new ApiException(
        response.status,
        'Unsuccessful HTTP Request',
        text,
        Object.fromEntries(response.headers),
      );
    }
    return JSON.parse(text) as KubernetesListObject<T>;
  };
}

/** A Watch that aborts a request opened after its informer was stopped, as soon as it is open. */
class StopAwareWatch extends Watch {
  readonly #stopped: () => boolean;

  constructor(kubeConfig: KubeConfig, stopped: () => boolean) {
    super(kubeConfig);
    this.#stopped = stopped;
  }

  override async watch(...args: Parameters<Watch['watch']>): ReturnType<Watch['watch']> {
    const request = await super.watch(...args);
    if (this.#stopped()) request.abort();
    return request;
  }
}

export class ResilientInformer<T extends KubernetesObject> {
  readonly #informer: Informer<T> & ObjectCache<T>;
  readonly #options: ResilientInformerOptions<T>;
  #failures = 0;
  /** Errors seen since construction (a start that saw one does not make the cache synced). */
  #errors = 0;
  #stopped = false;
  #synced = false;
  #restartTimer: NodeJS.Timeout | undefined;
  #resyncTimer: NodeJS.Timeout | undefined;
  /** Drops the apply bookkeeping and what `keep` trims; idempotent. */
  readonly #trim: (obj: T) => void;

  constructor(kubeConfig: KubeConfig, options: ResilientInformerOptions<T>) {
    this.#options = options;
    // Listed objects are trimmed page by page (`listInPages`), watched ones by the add and update
    // handlers below (trimming is idempotent: ListWatch hands the listed objects it stores to the
    // same handlers). `synced` turns true when a start has listed (or kept its list) and its watch
    // is open (`#run`).
    const lister =
      options.list ??
      collectionLister<T>(kubeConfig, options.path, options.labelSelector, options.fieldSelector);
    const list = (): Promise<KubernetesListObject<T>> =>
      listInPages(lister, this.#trim, (name, namespace) => this.#informer.get(name, namespace));
    const trim = (this.#trim = (obj: T): void => {
      options.inspect?.(obj);
      dropApplyBookkeeping(obj);
      options.keep?.(obj);
      shareCommonStrings(obj, options.alike?.(obj));
    });
    const watch = new StopAwareWatch(kubeConfig, () => this.#stopped);
    this.#informer = new ListWatch(
      options.path,
      watch,
      list,
      false,
      options.labelSelector,
      options.fieldSelector,
    );
    // The first handlers: the cached object is the one handed to them, so the cache keeps it lean.
    this.#informer.on('add', (o) => {
      trim(o);
      options.onChange(o, 'add');
    });
    this.#informer.on('update', (o) => {
      trim(o);
      options.onChange(o, 'update');
    });
    this.#informer.on('delete', (o) => {
      options.onChange(o, 'delete');
    });
    this.#informer.on('error', (err: unknown) => {
      this.#scheduleRestart(err);
    });
  }

  /** True once a list has been read into the cache; false again while the watch is down. */
  get synced(): boolean {
    return this.#synced;
  }

  /** The cached object, or undefined. */
  get(name: string, namespace?: string): T | undefined {
    return this.#informer.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.#informer.list(namespace);
  }

  /** Starts watching; never throws (a failed start is retried with backoff). */
  start(): void {
    this.#stopped = false;
    this.#run();
    this.#scheduleResync();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#restartTimer);
    clearTimeout(this.#resyncTimer);
    await this.#informer.stop();
  }

  /**
   * Starts ListWatch. Its start resolves once the cache holds a list and the watch is open: a first
   * start (or one after a 410) lists; a restart after a watch error keeps the cache and its
   * resourceVersion and only watches again, so `synced` is set here, not by the list (set by the
   * list, a watch that failed right after its list, e.g. 429 while the API server's storage
   * initializes, left `synced` false for good, and the controller never started its workers).
   */
  #run(): void {
    // ListWatch reports a failed list through its error handlers and then resolves its start: only
    // a start during which nothing failed makes the cache synced.
    const errorsBefore = this.#errors;
    this.#informer.start().then(
      () => {
        if (this.#stopped || this.#errors !== errorsBefore) return;
        this.#synced = true;
        this.#failures = 0;
      },
      (err: unknown) => {
        this.#scheduleRestart(err);
      },
    );
  }

  #scheduleRestart(err: unknown): void {
    this.#errors += 1;
    if (this.#stopped) return;
    this.#synced = false;
    this.#failures += 1;
    const delay = backoffDelayMs(
      this.#options.restartBackoff ?? { baseMs: 1_000, maxMs: 30_000 },
      this.#failures,
    );
    this.#options.log.warn(
      { err, path: this.#options.path, retryInMs: delay, failures: this.#failures },
      'watch failed; restarting',
    );
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => {
      this.#run();
    }, delay);
  }

  #scheduleResync(): void {
    const { resyncMs, onResync } = this.#options;
    if (resyncMs <= 0 || !onResync) return;
    const delay = resyncMs * (0.9 + Math.random() * 0.2);
    this.#resyncTimer = setTimeout(() => {
      if (this.#stopped) return;
      onResync(this.#informer.list());
      this.#scheduleResync();
    }, delay);
    this.#resyncTimer.unref();
  }
}
