/**
 * Each e2e file leaves the shared stack as it found it (README.md, "Tests"). The stack's operator
 * serves every CustomDomain in the cluster: a domain a file leaves behind is still reconciled,
 * issued and renewed while the next files run, and spends their CA's order budget and their
 * operator's time, so a file's result would depend on the files before it.
 *
 * This module is the e2e project's `setupFiles` entry (vitest.config.ts), so it runs in every e2e
 * file. It notes what exists when the file starts, and after the file's own `afterAll` hooks (its
 * hook is registered first, and vitest runs after-hooks in reverse) it removes what the file made:
 * 1. the CustomDomains created since the start (and any in a namespace created since), deleted
 *    and waited for: the operator runs their finalizers (a file that stopped the stack's operator
 *    has started it again in its own `afterAll`);
 * 2. the namespaces created since the start, with everything in them: the stack has no
 *    kube-controller-manager (envtest's choice), so no namespace controller empties and finalizes
 *    a deleted namespace; this module does both, as that controller would (the namespace deleted
 *    first, so it takes no new objects, then every namespaced resource the API server lists, then
 *    the namespace's `finalize` subresource);
 * 3. the cluster-scoped HostnameClaims created since the start.
 *
 * Whatever is still there after CLEANUP_WAIT_MS fails the file, naming it: a leftover is a fault of
 * the file (or of the operator's finalizer), and the next files must not inherit it. Before
 * throwing, finalizers of what is stuck are removed, so that the next file starts clean anyway.
 */
import { request, type RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect } from 'vitest';
import { CUSTOM_DOMAIN_PLURAL, GROUP, VERSION } from '../../../src/api/customdomain.js';
import { HOSTNAME_CLAIM_PLURAL } from '../../../src/api/hostnameclaim.js';
import { sandbox } from './cluster.js';

/** How long each step waits for what it deleted to be gone, ms. */
const CLEANUP_WAIT_MS = 60_000;

const CUSTOM_DOMAINS = `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`;
const HOSTNAME_CLAIMS = `/apis/${GROUP}/${VERSION}/${HOSTNAME_CLAIM_PLURAL}`;

interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  finalizers?: string[];
}
interface ObjectList {
  items: { metadata: ObjectMeta }[];
}

const kc = new KubeConfig();
kc.loadFromFile(sandbox.kubeconfig);
const server = kc.getCurrentCluster()?.server ?? '';

/** How long a request is retried while the API server answers 429 (a CRD's storage still starting), ms. */
const TOO_MANY_REQUESTS_RETRY_MS = 30_000;

/**
 * One request to the stack's API server as its admin, retried after the server's Retry-After while
 * it answers 429 (for up to TOO_MANY_REQUESTS_RETRY_MS: a CRD installed moments ago answers "storage
 * is (re)initializing" until its watch cache is ready). Resolves with the status and the parsed JSON
 * answer; 404 is an answer, not an error. Rejects on any other status from 400 up, naming it.
 */
async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const deadline = Date.now() + TOO_MANY_REQUESTS_RETRY_MS;
  for (;;) {
    const answer = await apiOnce(method, path, body);
    if (answer.status !== 429) return answer;
    if (Date.now() >= deadline)
      throw new Error(
        `${method} ${path}: HTTP 429 for ${TOO_MANY_REQUESTS_RETRY_MS} ms: ${String(answer.json).slice(0, 300)}`,
      );
    await new Promise((r) => setTimeout(r, Math.min(5_000, Math.max(250, answer.retryAfterMs))));
  }
}

async function apiOnce(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown; retryAfterMs: number }> {
  const url = new URL(path, server);
  const options: RequestOptions = { method, headers: { accept: 'application/json' } };
  await kc.applyToHTTPSOptions(options);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  if (payload !== undefined) {
    options.headers = {
      ...options.headers,
      'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
    };
  }
  return new Promise((resolve, reject) => {
    const req = request(url, options, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const retryAfterMs = Number(res.headers['retry-after'] ?? '1') * 1000;
        if (status === 429) {
          resolve({ status, json: text, retryAfterMs: Number.isFinite(retryAfterMs) ? retryAfterMs : 1_000 });
          return;
        }
        if (status >= 400 && status !== 404) {
          reject(new Error(`${method} ${path}: HTTP ${status}: ${text.slice(0, 300)}`));
          return;
        }
        let json: unknown;
        try {
          json = text === '' ? undefined : JSON.parse(text);
        } catch {
          json = text;
        }
        resolve({ status, json, retryAfterMs: 0 });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function list(path: string): Promise<ObjectMeta[]> {
  const { status, json } = await api('GET', path);
  return status === 404 ? [] : (json as ObjectList).items.map((i) => i.metadata);
}

const key = (m: ObjectMeta): string => `${m.namespace ?? ''}/${m.name}`;

/** What existed when the file started: namespace names, CustomDomain and HostnameClaim keys. */
interface Snapshot {
  namespaces: Set<string>;
  customDomains: Set<string>;
  hostnameClaims: Set<string>;
}

async function snapshot(): Promise<Snapshot> {
  const [namespaces, customDomains, hostnameClaims] = await Promise.all([
    list('/api/v1/namespaces'),
    list(CUSTOM_DOMAINS),
    list(HOSTNAME_CLAIMS),
  ]);
  return {
    namespaces: new Set(namespaces.map((m) => m.name)),
    customDomains: new Set(customDomains.map(key)),
    hostnameClaims: new Set(hostnameClaims.map(key)),
  };
}

/** The path of one object from the path of its collection (cluster-wide or namespaced list path). */
function objectPath(collection: string, m: ObjectMeta): string {
  if (m.namespace === undefined) return `${collection}/${m.name}`;
  const at = collection.lastIndexOf('/');
  return `${collection.slice(0, at)}/namespaces/${m.namespace}${collection.slice(at)}/${m.name}`;
}

/** The cluster-wide list paths of every namespaced resource that can be listed and deleted. */
async function namespacedResources(): Promise<string[]> {
  const groupVersions = ['/api/v1'];
  const groups = (await api('GET', '/apis')).json as {
    groups: { preferredVersion: { groupVersion: string } }[];
  };
  for (const g of groups.groups) groupVersions.push(`/apis/${g.preferredVersion.groupVersion}`);
  const paths: string[] = [];
  for (const gv of groupVersions) {
    const { status, json } = await api('GET', gv);
    if (status === 404) continue;
    const resources = (json as { resources: { name: string; namespaced: boolean; verbs: string[] }[] })
      .resources;
    for (const r of resources) {
      if (r.namespaced && !r.name.includes('/') && r.verbs.includes('list') && r.verbs.includes('delete'))
        paths.push(`${gv}/${r.name}`);
    }
  }
  return paths;
}

/**
 * Deletes each object of `objects` (found at `collection`), then waits until `remaining()` is
 * empty. Returns what was still there at the deadline, after removing its finalizers.
 */
async function deleteAndWait(
  collection: string,
  objects: ObjectMeta[],
  remaining: () => Promise<ObjectMeta[]>,
): Promise<ObjectMeta[]> {
  await Promise.all(objects.map((m) => api('DELETE', objectPath(collection, m))));
  const deadline = Date.now() + CLEANUP_WAIT_MS;
  for (;;) {
    const left = await remaining();
    if (left.length === 0) return [];
    if (Date.now() >= deadline) {
      await Promise.all(
        left.map((m) =>
          api('PATCH', objectPath(collection, m), { metadata: { finalizers: null } }).catch(() => undefined),
        ),
      );
      return left;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Removes what was made since `before`; returns a line per thing that would not go. */
async function cleanUp(before: Snapshot): Promise<string[]> {
  const problems: string[] = [];
  const newNamespace = async (): Promise<Set<string>> =>
    new Set((await list('/api/v1/namespaces')).map((m) => m.name).filter((n) => !before.namespaces.has(n)));
  const namespaces = await newNamespace();
  const made = (m: ObjectMeta): boolean =>
    !before.customDomains.has(key(m)) || namespaces.has(m.namespace ?? '');

  // 1. CustomDomains, through the operator's finalizer.
  const domains = (await list(CUSTOM_DOMAINS)).filter(made);
  const stuckDomains = await deleteAndWait(CUSTOM_DOMAINS, domains, async () =>
    (await list(CUSTOM_DOMAINS)).filter(made),
  );
  for (const m of stuckDomains)
    problems.push(
      `CustomDomain ${key(m)} still there ${CLEANUP_WAIT_MS} ms after its deletion (finalizers ${JSON.stringify(m.finalizers ?? [])})`,
    );

  // 2. The namespaces: deleted, emptied, then finalized.
  if (namespaces.size > 0) {
    // Deleted first, as the namespace controller does: a Terminating namespace takes no new objects
    // (the NamespaceLifecycle admission plugin), so nothing (an Event the operator records on a
    // RateLimitPolicy being torn down) appears in it while its contents are deleted. The namespace
    // stays, Terminating, until its `finalize` below.
    for (const ns of namespaces) await api('DELETE', `/api/v1/namespaces/${ns}`);
    const inNew = (m: ObjectMeta): boolean => namespaces.has(m.namespace ?? '');
    for (const collection of await namespacedResources()) {
      const objects = (await list(collection)).filter(inNew);
      if (objects.length === 0) continue;
      const stuck = await deleteAndWait(collection, objects, async () =>
        (await list(collection)).filter(inNew),
      );
      for (const m of stuck)
        problems.push(
          `${collection.split('/').pop() ?? ''} ${key(m)} still there ${CLEANUP_WAIT_MS} ms after its deletion`,
        );
    }
    for (const ns of namespaces) {
      // What the namespace controller does once a namespace is empty (no kube-controller-manager here).
      await api('PUT', `/api/v1/namespaces/${ns}/finalize`, {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: ns },
        spec: { finalizers: [] },
      });
    }
    const deadline = Date.now() + CLEANUP_WAIT_MS;
    let left = await newNamespace();
    while (left.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      left = await newNamespace();
    }
    for (const ns of left)
      problems.push(`namespace ${ns} still there ${CLEANUP_WAIT_MS} ms after its deletion`);
  }

  // 3. HostnameClaims (cluster-scoped) made since the start.
  const newClaim = (m: ObjectMeta): boolean => !before.hostnameClaims.has(key(m));
  const claims = (await list(HOSTNAME_CLAIMS)).filter(newClaim);
  const stuckClaims = await deleteAndWait(HOSTNAME_CLAIMS, claims, async () =>
    (await list(HOSTNAME_CLAIMS)).filter(newClaim),
  );
  for (const m of stuckClaims)
    problems.push(`HostnameClaim ${m.name} still there ${CLEANUP_WAIT_MS} ms after its deletion`);
  return problems;
}

let before: Snapshot | undefined;

beforeAll(async () => {
  before = await snapshot();
});

// Registered before the file's own hooks, so vitest runs it after them.
afterAll(async () => {
  if (!before)
    throw new Error('the e2e clean-up found no snapshot of the stack taken at the start of the file');
  const file = expect.getState().testPath ?? 'this e2e file';
  const problems = await cleanUp(before);
  if (problems.length > 0) {
    throw new Error(
      `${file} left objects that could not be removed (their finalizers were removed so the next file starts clean):\n  ${problems.join('\n  ')}`,
    );
  }
}, 6 * CLEANUP_WAIT_MS);
