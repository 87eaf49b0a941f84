/**
 * The sandbox runs as the chart's defaults do (docs/reliability.md, "Tenant isolation: threat
 * model"): every ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding the chart renders
 * (deploy/portico-admission.yaml, written by scripts/render-deploy.sh, so no Helm at run time), the
 * operator under the chart's controller identity (the ServiceAccount those policies name), and a
 * routing class of Portico's own (`routing.ingress.className`) that the sandbox's Contour alone
 * serves (docs/routing.md, "A routing class of Portico's own"); with an apps domain, also the policy
 * that reserves its routes to the controller (deploy/portico-admission-apps-domain.yaml, rendered for
 * a placeholder apps domain that the sandbox replaces with its own; docs/routing.md, "The apps
 * domain's routes").
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { parseAllDocuments, parse, stringify } from 'yaml';

import { CONTOUR, type ContourInstance } from '../data-planes/contour/sandbox-process.js';
import { validateHostname } from '../domain/hostname.js';
import { SandboxError } from './errors.js';
import { runKubectl, type Kubectl } from './kubectl.js';
import type { SandboxPaths } from './paths.js';

/** The chart's default `routing.ingress.className` (charts/portico/values.yaml). */
export const SANDBOX_INGRESS_CLASS = 'portico';

/** The rendered admission policies of the chart's defaults, relative to the repository. */
export const ADMISSION_MANIFEST = path.join('deploy', 'portico-admission.yaml');

/**
 * The policy reserving the apps domain's routes (templates/apps-domain-routes-admission.yaml),
 * rendered for `APPS_DOMAIN_PLACEHOLDER`, relative to the repository.
 */
export const APPS_DOMAIN_ADMISSION_MANIFEST = path.join('deploy', 'portico-admission-apps-domain.yaml');

/** The apps domain that scripts/render-deploy.sh renders that policy for (RFC 2606 `.invalid`). */
export const APPS_DOMAIN_PLACEHOLDER = 'apps.replace-me.invalid';

/** The policy's variable holding the apps domain, a CEL string literal. */
const APPS_DOMAIN_VARIABLE = 'appsDomain';

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
 * The policies and bindings of `appsDomainText` (deploy/portico-admission-apps-domain.yaml's text)
 * with the apps domain `appsDomain` in place of `APPS_DOMAIN_PLACEHOLDER`: the policy's
 * `appsDomain` variable, the one place the chart writes the domain (its message reads the
 * variable), is set to `appsDomain` as a CEL string literal, as `helm template --set
 * appsDomain.domain=<appsDomain>` renders it.
 *
 * @param appsDomain a lowercase hostname (the operator's `--apps-domain`)
 * @throws SandboxError when `appsDomain` is not a valid hostname, the text holds no policy (as
 *   `admissionManifests`), or no policy has the variable, or the placeholder is left anywhere else
 */
export function appsDomainAdmission(appsDomainText: string, source: string, appsDomain: string): Manifest[] {
  const problem = validateHostname(appsDomain);
  if (problem !== undefined) throw new SandboxError(`apps domain "${appsDomain}": ${problem.message}`);
  const manifests = admissionManifests(appsDomainText, source);
  let set = 0;
  for (const manifest of manifests) {
    const variables = (manifest as { spec?: { variables?: { name: string; expression: string }[] } }).spec
      ?.variables;
    for (const variable of variables ?? []) {
      if (variable.name === APPS_DOMAIN_VARIABLE && variable.expression === `'${APPS_DOMAIN_PLACEHOLDER}'`) {
        variable.expression = `'${appsDomain}'`;
        set += 1;
      }
    }
  }
  if (set === 0 || JSON.stringify(manifests).includes(APPS_DOMAIN_PLACEHOLDER)) {
    throw new SandboxError(
      `${source}: expected the apps domain ${APPS_DOMAIN_PLACEHOLDER} in the variable ${APPS_DOMAIN_VARIABLE} of its policy alone: run scripts/render-deploy.sh`,
    );
  }
  return manifests;
}

/** The text of `<repoRoot>/<file>`. @throws SandboxError naming render-deploy.sh when it is missing */
async function readRendered(repoRoot: string, file: string): Promise<{ path: string; text: string }> {
  const full = path.join(repoRoot, file);
  try {
    return { path: full, text: await readFile(full, 'utf8') };
  } catch {
    throw new SandboxError(`${full} does not exist: run scripts/render-deploy.sh`);
  }
}

/** `kubectl apply --server-side` of `manifests`. */
async function applyManifests(kubectl: Kubectl, manifests: readonly Manifest[]): Promise<void> {
  await runKubectl(kubectl, ['apply', '--server-side', '--force-conflicts', '-f', '-'], {
    input: manifests.map((m) => `---\n${stringify(m)}`).join(''),
  });
}

/**
 * Waits until a server dry-run create of `probe` by `kubectl`'s user is refused with a message
 * containing `refusal`: policies take effect a moment after they are written.
 *
 * @throws SandboxError naming `policy` when that does not happen within 30 s
 */
async function waitUntilEnforced(
  kubectl: Kubectl,
  policy: string,
  probe: object,
  refusal: string,
): Promise<void> {
  const refused = async (): Promise<true | string> => {
    try {
      await runKubectl(kubectl, ['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(probe) });
      return `the probe ${JSON.stringify(probe)} from the admin is still admitted`;
    } catch (err: unknown) {
      const message = err instanceof Error ? err.message : String(err);
      return message.includes(refusal) ? true : message;
    }
  };
  const deadline = Date.now() + 30_000;
  for (let last = await refused(); last !== true; last = await refused()) {
    if (Date.now() >= deadline) {
      throw new SandboxError(`the chart's ${policy} policy is not enforced after 30 s: ${last}`);
    }
    await sleep(300);
  }
}

/** An Ingress in `namespace` for the probes: `spec` beside a default backend. */
function probeIngress(namespace: string, spec: object): object {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: 'portico-admission-probe', namespace },
    spec: { ...spec, defaultBackend: { service: { name: 'portico-admission-probe', port: { number: 80 } } } },
  };
}

/**
 * Applies every admission policy and binding of `<repoRoot>/deploy/portico-admission.yaml`, then
 * waits until the API server enforces the routing-class one: a dry-run Ingress of
 * `SANDBOX_INGRESS_CLASS` from `kubectl`'s user (not the controller) is refused.
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
  const file = await readRendered(repoRoot, ADMISSION_MANIFEST);
  const manifests = admissionManifests(file.text, file.path);
  await applyManifests(kubectl, manifests);
  await waitUntilEnforced(
    kubectl,
    'routing-class',
    probeIngress(namespace, { ingressClassName: SANDBOX_INGRESS_CLASS }),
    `of ingress class ${SANDBOX_INGRESS_CLASS}`,
  );
  return manifests.filter((m) => m.kind === 'ValidatingAdmissionPolicy').map((m) => m.metadata.name);
}

/**
 * Applies the policy and binding of `<repoRoot>/deploy/portico-admission-apps-domain.yaml` for
 * `appsDomain` (`appsDomainAdmission`), then waits until the API server enforces it: a dry-run
 * Ingress of no class for `portico-admission-probe.<appsDomain>` from `kubectl`'s user is refused.
 *
 * @returns the manifests applied (to delete them again)
 * @throws as `appsDomainAdmission`; SandboxError when the file is missing or the policy is not
 *   enforced within 30 s; CommandFailedError when kubectl fails
 */
export async function applyAppsDomainAdmission(
  kubectl: Kubectl,
  repoRoot: string,
  namespace: string,
  appsDomain: string,
): Promise<Manifest[]> {
  const file = await readRendered(repoRoot, APPS_DOMAIN_ADMISSION_MANIFEST);
  const manifests = appsDomainAdmission(file.text, file.path, appsDomain);
  await applyManifests(kubectl, manifests);
  await waitUntilEnforced(
    kubectl,
    'apps-domain routes',
    probeIngress(namespace, { rules: [{ host: `portico-admission-probe.${appsDomain}` }] }),
    `in the apps domain ${appsDomain}`,
  );
  return manifests;
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
 * With `enabled`: `applyChartAdmission`, with `appsDomain` also `applyAppsDomainAdmission` (the
 * chart renders that policy with `appsDomain.domain` set), and `writeControllerKubeconfig`; the
 * class `SANDBOX_INGRESS_CLASS` for the operator and Contour (logged with `log`). Without: nothing
 * is applied; the operator uses `kubectl`'s kubeconfig and no class.
 *
 * @throws as `applyChartAdmission`, `applyAppsDomainAdmission` and `writeControllerKubeconfig`
 */
export async function setUpChartDefaults(
  enabled: boolean,
  kubectl: Kubectl,
  paths: SandboxPaths,
  repoRoot: string,
  namespace: string,
  log: (line: string) => void,
  appsDomain?: string,
): Promise<ChartDefaults> {
  if (!enabled) return { controllerKubeconfig: kubectl.kubeconfig };
  log(`applying the chart's admission policies (${ADMISSION_MANIFEST}); the controller's ServiceAccount`);
  await applyChartAdmission(kubectl, repoRoot, namespace);
  if (appsDomain !== undefined) {
    log(`reserving the routes of ${appsDomain} to the controller (${APPS_DOMAIN_ADMISSION_MANIFEST})`);
    await applyAppsDomainAdmission(kubectl, repoRoot, namespace, appsDomain);
  }
  const controllerKubeconfig = await writeControllerKubeconfig(kubectl, paths, namespace);
  return {
    controllerKubeconfig,
    ingressClass: SANDBOX_INGRESS_CLASS,
    contourInstance: { name: CONTOUR, ingressClassName: SANDBOX_INGRESS_CLASS },
  };
}
