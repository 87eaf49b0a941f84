/**
 * What the chart tests (helm.test.ts, rbac.test.ts) share: the helm and kubectl binaries that
 * scripts/install-tools.sh builds, run to completion against the e2e stack's API server; the chart
 * rendered and parsed into objects; and the configuration the chart gives each component.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { sandbox } from './cluster.js';

export const REPO = fileURLToPath(new URL('../../..', import.meta.url));
export const CHART = `${REPO}charts/portico`;
export const CLI = `${REPO}dist/cli.js`;
/**
 * The image the chart tests name where they give no ci/ values file: the chart from a checkout names
 * none (its install fails saying so, docs/install.md), and these tests never run it; the tag is the
 * one scripts/test.sh builds, as in the ci/ files.
 */
export const IMAGE_SETS = ['image.repository=localhost/portico', 'image.tag=e2e'] as const;
/** The value variations every chart check runs over (chart-testing's ci/ convention). */
export const VARIATIONS = readdirSync(`${CHART}/ci`)
  .filter((f) => f.endsWith('-values.yaml'))
  .sort();

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` to completion; never throws for a non-zero exit (the caller asserts on it). Without
 * `input` the child gets no standard input (/dev/null): writing an empty one to a child that exits at
 * once, as npm refusing a release does, could fail with EPIPE.
 */
export function run(
  command: string,
  args: readonly string[],
  options: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? REPO,
      env: options.env ?? process.env,
      timeout: options.timeoutMs ?? 120_000,
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr?.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** Like `run`, but throws with stderr when the exit code is not 0. */
export async function runOk(
  command: string,
  args: readonly string[],
  options: Parameters<typeof run>[2] = {},
): Promise<string> {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited ${result.code}:\n${result.stderr}${result.stdout}`);
  }
  return result.stdout;
}

let binDir: Promise<string> | undefined;

/** The directory holding helm, kubectl and the other test tools (scripts/install-tools.sh --test prints it; cached builds). */
export function toolsBin(): Promise<string> {
  binDir ??= runOk(`${REPO}scripts/install-tools.sh`, ['--test'], { timeoutMs: 1_800_000 }).then(
    (out) => out.trim().split('\n').at(-1) ?? '',
  );
  return binDir;
}

export async function helm(
  args: readonly string[],
  options: Parameters<typeof run>[2] = {},
): Promise<RunResult> {
  return run(`${await toolsBin()}/helm`, [...args, '--kubeconfig', sandbox.kubeconfig], options);
}

export async function kubectl(
  args: readonly string[],
  options: Parameters<typeof run>[2] & { kubeconfig?: string } = {},
): Promise<RunResult> {
  return run(
    `${await toolsBin()}/kubectl`,
    ['--kubeconfig', options.kubeconfig ?? sandbox.kubeconfig, ...args],
    options,
  );
}

/**
 * Who kubectl acts as: a user name (`--as`), or a user with its groups (`--as-group` each), as a
 * ServiceAccount's token would carry them (`system:serviceaccounts`, `system:serviceaccounts:<ns>`).
 */
export type KubectlIdentity = string | { readonly user: string; readonly groups: readonly string[] };

/** kubectl's impersonation flags for `identity`; none (the admin) when undefined. */
export function impersonationFlags(identity?: KubectlIdentity): string[] {
  if (identity === undefined || identity === '') return [];
  if (typeof identity === 'string') return ['--as', identity];
  return ['--as', identity.user, ...identity.groups.flatMap((g) => ['--as-group', g])];
}

/** `kubectl <args> -f -` of `objects` (each a YAML document), as `user` (default: the admin). */
export function kubectlObjects(
  args: string[],
  objects: unknown[],
  user?: KubectlIdentity,
): Promise<RunResult> {
  return kubectl([...args, '-f', '-', ...impersonationFlags(user)], {
    input: objects.map((o) => `---\n${stringify(o)}`).join(''),
  });
}

/**
 * `helm template` of one of the chart's templates (`templates/<template>`) for release `release` in
 * `namespace`, with ValidatingAdmissionPolicy available, the sandbox's CNAME target, IMAGE_SETS and
 * `sets` (`--set` values, after those, so they may override them), default values otherwise; fails the
 * test when helm does.
 *
 * @returns the rendered YAML
 */
export async function renderChartTemplate(
  release: string,
  namespace: string,
  template: string,
  sets: readonly string[] = [],
): Promise<string> {
  const rendered = await run(`${await toolsBin()}/helm`, [
    'template',
    release,
    CHART,
    '--namespace',
    namespace,
    '--kube-version',
    '1.37.0',
    '--api-versions',
    'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy',
    '--set',
    `platform.cnameTarget=${sandbox.platformCnameTarget}`,
    ...[...IMAGE_SETS, ...sets].flatMap((set) => ['--set', set]),
    '--show-only',
    `templates/${template}`,
  ]);
  expect(rendered.code, rendered.stderr).toBe(0);
  return rendered.stdout;
}

/** A rendered object, loosely typed: the tests read the fields they check. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}

export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null && typeof m === 'object');
}

/**
 * `helm template` of the chart with a ci/ values file (IMAGE_SETS unless it names an image) and extra
 * `--set`s. `helm template` has no cluster to ask for its version, hence --kube-version (the
 * sandbox's minor).
 */
export async function template(
  namespace: string,
  valuesFile: string | undefined,
  sets: readonly string[] = [],
): Promise<RunResult> {
  const args = ['template', 'portico', CHART, '--namespace', namespace, '--kube-version', '1.37.0'];
  if (valuesFile) args.push('--values', `${CHART}/ci/${valuesFile}`);
  const namesImage =
    valuesFile !== undefined &&
    (parse(readFileSync(`${CHART}/ci/${valuesFile}`, 'utf8')) as { image?: unknown } | null)?.image !==
      undefined;
  for (const s of [...(namesImage ? [] : IMAGE_SETS), ...sets]) args.push('--set', s);
  return run(`${await toolsBin()}/helm`, args);
}

export interface ContainerSpec {
  name: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: Record<string, unknown> }[];
  [key: string]: unknown;
}

export interface PodSpec {
  serviceAccountName?: string;
  containers: ContainerSpec[];
  [key: string]: unknown;
}

export function podSpec(deployment: Manifest): PodSpec {
  return (deployment.spec as { template: { spec: PodSpec } }).template.spec;
}

export function findDeployment(manifests: Manifest[], component: 'controller' | 'ratelimit'): Manifest {
  const found = manifests.find(
    (m) => m.kind === 'Deployment' && m.metadata.labels?.['app.kubernetes.io/component'] === component,
  );
  if (!found) throw new Error(`no ${component} Deployment rendered`);
  return found;
}

/**
 * Stands in for the kubelet's Secret volumes when a test runs a rendered container's command here:
 * for each of `container`'s volumeMounts backed by a `secret` volume of `pod` with `items`, the
 * files `items[].path` under a directory in `root`, holding `refs['<secretName>/<key>']` (else
 * "secret"); returns `args` with every path under such a mountPath moved to that directory (also
 * after a `--flag=`).
 *
 * @throws Error for a Secret volume without `items` (which keys it holds is not in the manifest)
 */
export async function secretVolumesAt(
  root: string,
  pod: PodSpec,
  container: ContainerSpec,
  args: readonly string[],
  refs: Record<string, string> = {},
): Promise<string[]> {
  interface Volume {
    name: string;
    secret?: { secretName: string; items?: { key: string; path: string }[] };
  }
  const volumes = (pod['volumes'] ?? []) as Volume[];
  const mounts = (container['volumeMounts'] ?? []) as { name: string; mountPath: string }[];
  let out = [...args];
  for (const mount of mounts) {
    const secret = volumes.find((v) => v.name === mount.name)?.secret;
    if (!secret) continue;
    if (!secret.items) throw new Error(`Secret volume ${mount.name} has no items: its files are not known`);
    const dir = path.join(root, mount.name);
    await mkdir(dir, { recursive: true });
    for (const item of secret.items) {
      await mkdir(path.dirname(path.join(dir, item.path)), { recursive: true });
      await writeFile(path.join(dir, item.path), refs[`${secret.secretName}/${item.key}`] ?? 'secret');
    }
    const prefix = `${mount.mountPath.replace(/\/$/, '')}/`;
    out = out.map((arg) => arg.replaceAll(prefix, `${dir}/`));
  }
  return out;
}

/**
 * The environment a container gets, with `valueFrom` resolved the way the kubelet would for the
 * fields the chart uses: fieldRef metadata.namespace, and secretKeyRef / configMapKeyRef from
 * `refs` (`<name>/<key>` → value).
 */
export function containerEnv(
  container: ContainerSpec,
  namespace: string,
  refs: Record<string, string> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    const from = e.valueFrom as
      | {
          fieldRef?: { fieldPath: string };
          secretKeyRef?: { name: string; key: string };
          configMapKeyRef?: { name: string; key: string };
        }
      | undefined;
    if (from?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = namespace;
    const ref = from?.secretKeyRef ?? from?.configMapKeyRef;
    if (ref) env[e.name] = refs[`${ref.name}/${ref.key}`] ?? `value-of-${ref.name}-${ref.key}`;
  }
  return env;
}

const helpVariables = new Map<string, Promise<Set<string>>>();

/**
 * The variables a `portico <command> --help` lists (`[$NAME]` or `[$A, $B]` after each flag); the
 * help is asked once per command and test file (dist/ does not change during a run).
 */
export function knownVariables(command: 'controller' | 'ratelimit-server'): Promise<Set<string>> {
  let known = helpVariables.get(command);
  if (!known) {
    known = runOk(process.execPath, [CLI, command, '--help']).then((help) => {
      const names = new Set<string>();
      for (const m of help.matchAll(/\[(\$[A-Z0-9_]+(?:, \$[A-Z0-9_]+)*)\]/g)) {
        for (const name of (m[1] ?? '').split(', ')) names.add(name.slice(1));
      }
      return names;
    });
    helpVariables.set(command, known);
  }
  return known;
}
