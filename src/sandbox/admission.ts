/**
 * The sandbox runs as the chart's defaults do (docs/reliability.md, "Tenant isolation: threat
 * model"): every ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding the chart renders
 * (deploy/portico-admission.yaml, written by scripts/render-deploy.sh, so no Helm at run time), the
 * operator under the chart's controller identity (the ServiceAccount those policies name), and a
 * routing class of Portico's own (`routing.ingress.className`) that the sandbox's Contour alone
 * serves (docs/routing.md, "A routing class of Portico's own").
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { parseAllDocuments, parse, stringify } from 'yaml';

import { CONTOUR, type ContourInstance } from '../data-planes/contour/sandbox-process.js';
import { SandboxError } from './errors.js';
import { runKubectl, type Kubectl } from './kubectl.js';
import type { SandboxPaths } from './paths.js';

/** The chart's default `routing.ingress.className` (charts/portico/values.yaml). */
export const SANDBOX_INGRESS_CLASS = 'portico';

/** The rendered admission policies of the chart's defaults, relative to the repository. */
export const ADMISSION_MANIFEST = path.join('deploy', 'portico-admission.yaml');

/** The chart's controller ServiceAccount (release `portico`), as deploy/ renders it. */
export const CONTROLLER_SERVICE_ACCOUNT = 'portico-controller';

const ADMISSION_KINDS = new Set(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);

/** One manifest: what `kubectl apply` needs to know of it. */
export interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string };
}

/**
 * Every ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding of a multi-document YAML,
 * in order; other kinds and empty documents are left out.
 *
 * @throws SandboxError when a document is not valid YAML, or none is an admission policy
 */
export function admissionManifests(yamlText: string, source: string): Manifest[] {
  const found: Manifest[] = [];
  for (const doc of parseAllDocuments(yamlText)) {
    if (doc.errors.length > 0) {
      throw new SandboxError(`${source}: not valid YAML: ${doc.errors[0]?.message ?? ''}`);
    }
    const value = doc.toJS() as Partial<Manifest> | null;
    if (value && typeof value.kind === 'string' && ADMISSION_KINDS.has(value.kind)) {
      found.push(value as Manifest);
    }
  }
  if (found.length === 0) {
    throw new SandboxError(
      `${source} holds no ValidatingAdmissionPolicy: run scripts/render-deploy.sh (it renders the chart's policies there)`,
    );
  }
  return found;
}

/**
 * Applies every admission policy and binding of `<repoRoot>/deploy/portico-admission.yaml`, then
 * waits until the API server enforces the routing-class one: a dry-run Ingress of
 * `SANDBOX_INGRESS_CLASS` from `kubectl`'s user (not the controller) is refused. Policies take
 * effect a moment after they are written.
 *
 * @returns the names of the policies applied
 * @throws SandboxError when the file is missing or holds none; CommandFailedError when kubectl
 *   fails; SandboxError when the policy is not enforced within 30 s
 */
export async function applyChartAdmission(
  kubectl: Kubectl,
  repoRoot: string,
  namespace: string,
): Promise<string[]> {
  const file = path.join(repoRoot, ADMISSION_MANIFEST);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new SandboxError(`${file} does not exist: run scripts/render-deploy.sh`);
  }
  const manifests = admissionManifests(text, file);
  await runKubectl(kubectl, ['apply', '--server-side', '--force-conflicts', '-f', '-'], {
    input: manifests.map((m) => `---\n${stringify(m)}`).join(''),
  });
  const probe = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: 'portico-admission-probe', namespace },
    spec: {
      ingressClassName: SANDBOX_INGRESS_CLASS,
      defaultBackend: { service: { name: 'portico-admission-probe', port: { number: 80 } } },
    },
  };
  const refused = async (): Promise<true | string> => {
    try {
      await runKubectl(kubectl, ['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(probe) });
      return `an Ingress of class ${SANDBOX_INGRESS_CLASS} from the admin is still admitted`;
    } catch (err: unknown) {
      const message = err instanceof Error ? err.message : String(err);
      return message.includes(`of ingress class ${SANDBOX_INGRESS_CLASS}`) ? true : message;
    }
  };
  const deadline = Date.now() + 30_000;
  for (let last = await refused(); last !== true; last = await refused()) {
    if (Date.now() >= deadline) {
      throw new SandboxError(`the chart's routing-class policy is not enforced after 30 s: ${last}`);
    }
    await sleep(300);
  }
  return manifests.filter((m) => m.kind === 'ValidatingAdmissionPolicy').map((m) => m.metadata.name);
}

/**
 * Writes `<dir>/controller.kubeconfig`: the cluster of `kubectl`'s kubeconfig with a token of the
 * chart's controller ServiceAccount in `namespace` (created here, bound to cluster-admin: the
 * sandbox grants more than the chart's ClusterRole), so the policies see the operator as the
 * chart's controller (`system:serviceaccount:<namespace>:portico-controller`).
 *
 * @returns the file written (mode 0600)
 * @throws CommandFailedError when kubectl fails; SandboxError when the kubeconfig has no user
 */
export async function writeControllerKubeconfig(
  kubectl: Kubectl,
  paths: SandboxPaths,
  namespace: string,
): Promise<string> {
  const binding = `portico-sandbox-${CONTROLLER_SERVICE_ACCOUNT}`;
  const objects = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: CONTROLLER_SERVICE_ACCOUNT, namespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: binding },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: CONTROLLER_SERVICE_ACCOUNT, namespace }],
    },
  ];
  await runKubectl(kubectl, ['apply', '--server-side', '-f', '-'], {
    input: objects.map((o) => `---\n${stringify(o)}`).join(''),
  });
  const token = (
    await runKubectl(kubectl, [
      'create',
      'token',
      CONTROLLER_SERVICE_ACCOUNT,
      '-n',
      namespace,
      '--duration=8760h',
    ])
  ).trim();
  const config = parse(await readFile(kubectl.kubeconfig, 'utf8')) as { users?: { user?: unknown }[] };
  if (!Array.isArray(config.users) || config.users.length === 0) {
    throw new SandboxError(`${kubectl.kubeconfig} names no user`);
  }
  for (const user of config.users) user.user = { token };
  const file = path.join(paths.dir, 'controller.kubeconfig');
  await writeFile(file, stringify(config), { mode: 0o600 });
  return file;
}

/** What the rest of the sandbox takes from `setUpChartDefaults`. */
export interface ChartDefaults {
  /** The operator's kubeconfig: the controller ServiceAccount's, or the admin's without the defaults. */
  readonly controllerKubeconfig: string;
  /** `--ingress-class` of the operator; undefined: none. */
  readonly ingressClass?: string | undefined;
  /** Contour's instance serving `ingressClass` alone (`startContour`); undefined: every classless route. */
  readonly contourInstance?: ContourInstance | undefined;
}

/**
 * With `enabled`: `applyChartAdmission` and `writeControllerKubeconfig`, the class
 * `SANDBOX_INGRESS_CLASS` for the operator and Contour (logged with `log`). Without: nothing is applied; the operator uses `kubectl`'s kubeconfig
 * and no class.
 *
 * @throws as `applyChartAdmission` and `writeControllerKubeconfig`
 */
export async function setUpChartDefaults(
  enabled: boolean,
  kubectl: Kubectl,
  paths: SandboxPaths,
  repoRoot: string,
  namespace: string,
  log: (line: string) => void,
): Promise<ChartDefaults> {
  if (!enabled) return { controllerKubeconfig: kubectl.kubeconfig };
  log(`applying the chart's admission policies (${ADMISSION_MANIFEST}); the controller's ServiceAccount`);
  await applyChartAdmission(kubectl, repoRoot, namespace);
  const controllerKubeconfig = await writeControllerKubeconfig(kubectl, paths, namespace);
  return {
    controllerKubeconfig,
    ingressClass: SANDBOX_INGRESS_CLASS,
    contourInstance: { name: CONTOUR, ingressClassName: SANDBOX_INGRESS_CLASS },
  };
}
