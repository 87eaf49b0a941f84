/**
 * `examples/`: the manifests a newcomer applies first. The sandbox plays the customer for them (it
 * creates the CNAME each CustomDomain asks for in the sandbox's DNS, and one for each hostname of a
 * Project), applies them, and waits until every Project and every CustomDomain is Ready.
 */
import { readFile, readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { parseAllDocuments } from 'yaml';

import { projectHostnames } from '../api/project.js';
import type { DnsManagementClient } from './dns-server.js';
import { CommandFailedError, ExamplesNotReadyError, SandboxError } from './errors.js';
import { runKubectl, type Kubectl } from './kubectl.js';

/** A CustomDomain found in a manifest. */
export interface ExampleCustomDomain {
  readonly namespace: string;
  readonly name: string;
  readonly hostname: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The CustomDomains in one YAML text (multi-document). Other kinds are skipped. */
export function customDomainsIn(yamlText: string, source: string): ExampleCustomDomain[] {
  const found: ExampleCustomDomain[] = [];
  for (const doc of parseAllDocuments(yamlText)) {
    if (doc.errors.length > 0) {
      throw new SandboxError(`${source}: invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
    }
    const object: unknown = doc.toJS();
    if (!isRecord(object) || object['kind'] !== 'CustomDomain') continue;
    const metadata = isRecord(object['metadata']) ? object['metadata'] : {};
    const spec = isRecord(object['spec']) ? object['spec'] : {};
    const { name, namespace } = metadata;
    const { hostname } = spec;
    if (typeof name !== 'string' || typeof hostname !== 'string') {
      throw new SandboxError(`${source}: a CustomDomain without metadata.name or spec.hostname`);
    }
    found.push({ name, namespace: typeof namespace === 'string' ? namespace : 'default', hostname });
  }
  return found;
}

/**
 * A Project found in a manifest, with every hostname it lists (the primary, its www counterpart with
 * wwwRedirect, the redirects).
 */
export interface ExampleProject {
  readonly namespace: string;
  readonly name: string;
  readonly hostnames: readonly string[];
}

/** The Projects in one YAML text (multi-document). Other kinds are skipped. */
export function projectsIn(yamlText: string, source: string): ExampleProject[] {
  const found: ExampleProject[] = [];
  for (const doc of parseAllDocuments(yamlText)) {
    if (doc.errors.length > 0) {
      throw new SandboxError(`${source}: invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
    }
    const object: unknown = doc.toJS();
    if (!isRecord(object) || object['kind'] !== 'Project') continue;
    const metadata = isRecord(object['metadata']) ? object['metadata'] : {};
    const spec = isRecord(object['spec']) ? object['spec'] : {};
    const domains = isRecord(spec['domains']) ? spec['domains'] : {};
    const { name, namespace } = metadata;
    const { primary } = domains;
    if (typeof name !== 'string' || typeof primary !== 'string') {
      throw new SandboxError(`${source}: a Project without metadata.name or spec.domains.primary`);
    }
    const redirects = Array.isArray(domains['redirects']) ? (domains['redirects'] as unknown[]) : [];
    const froms = redirects.flatMap((r) =>
      isRecord(r) && typeof r['from'] === 'string' ? [{ from: r['from'] }] : [],
    );
    const wwwRedirect = domains['wwwRedirect'] === true;
    found.push({
      name,
      namespace: typeof namespace === 'string' ? namespace : 'default',
      hostnames: projectHostnames({ domains: { primary, redirects: froms, wwwRedirect } }),
    });
  }
  return found;
}

/** The `.yaml`/`.yml` files of `dir`, sorted (kubectl applies a directory in that order too). */
export async function manifestFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir);
  return entries
    .filter((e) => e.endsWith('.yaml') || e.endsWith('.yml'))
    .sort()
    .map((e) => path.join(dir, e));
}

/**
 * Sets a CNAME `<hostname>` → `target` for every CustomDomain in `dir`, then `kubectl apply -f dir`.
 *
 * @returns the CustomDomains applied
 * @throws SandboxError on unreadable manifests; ManagementApiError, CommandFailedError
 */
export async function applyExamples(
  dir: string,
  kubectl: Kubectl,
  dns: DnsManagementClient,
  cnameTarget: string,
): Promise<{ domains: ExampleCustomDomain[]; projects: ExampleProject[] }> {
  const domains: ExampleCustomDomain[] = [];
  const projects: ExampleProject[] = [];
  for (const file of await manifestFiles(dir)) {
    const text = await readFile(file, 'utf8');
    domains.push(...customDomainsIn(text, file));
    projects.push(...projectsIn(text, file));
  }
  const hostnames = new Set([...domains.map((d) => d.hostname), ...projects.flatMap((p) => p.hostnames)]);
  for (const hostname of hostnames) await dns.setCname(hostname, cnameTarget);
  // kubectl does not follow a symlinked directory: hand it the real path.
  await runKubectl(kubectl, ['apply', '-f', await realpath(dir)]);
  return { domains, projects };
}

const SUMMARY_JSONPATH =
  '{range .items[*]}{.metadata.namespace}/{.metadata.name}: phase {.status.phase},' +
  ' Ready {.status.conditions[?(@.type=="Ready")].reason}: {.status.conditions[?(@.type=="Ready")].message}{"\\n"}{end}';

async function summary(kubectl: Kubectl, resource: string): Promise<string> {
  try {
    return (await runKubectl(kubectl, ['get', resource, '-A', '-o', `jsonpath=${SUMMARY_JSONPATH}`])).trim();
  } catch (err: unknown) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * Waits until every CustomDomain (or, with `resource` `projects`, every Project) in the cluster has
 * condition Ready=True, printing their phases whenever they change.
 *
 * @param timeoutMs the deadline, in milliseconds
 * @param progress receives one line per change
 * @throws ExamplesNotReadyError at the deadline, with each domain's phase and Ready message
 */
export async function waitForCustomDomainsReady(
  kubectl: Kubectl,
  timeoutMs: number,
  progress: (line: string) => void,
  resource: 'customdomains' | 'projects' = 'customdomains',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const chunkSeconds = Math.max(1, Math.min(5, Math.ceil((deadline - Date.now()) / 1000)));
    try {
      await runKubectl(kubectl, [
        'wait',
        '--for=condition=Ready',
        resource,
        '--all',
        '-A',
        `--timeout=${chunkSeconds}s`,
      ]);
      return;
    } catch (err: unknown) {
      if (!(err instanceof CommandFailedError)) throw err;
    }
    const now = await summary(kubectl, resource);
    if (now !== last) {
      for (const line of now.split('\n')) progress(`  ${line}`);
      last = now;
    }
    if (Date.now() >= deadline) {
      throw new ExamplesNotReadyError(
        `the example ${resource === 'projects' ? 'Projects' : 'CustomDomains'} are not Ready after ${Math.round(timeoutMs / 1000)} s:\n${now}\n` +
          `inspect with: kubectl describe ${resource} -A`,
      );
    }
    await sleep(200);
  }
}

/**
 * Waits until every Project's auto-generated subdomain serves (`status.subdomain.serving` True:
 * Contour took its route with the wildcard certificate; docs/customdomains.md, "The auto-generated
 * subdomain"), printing each Project's subdomain status when it changes.
 *
 * @param timeoutMs the deadline, in milliseconds
 * @throws ExamplesNotReadyError at the deadline, with each Project's subdomain reason and message
 */
export async function waitForSubdomainsServing(
  kubectl: Kubectl,
  timeoutMs: number,
  progress: (line: string) => void,
): Promise<void> {
  const jsonpath =
    '{range .items[*]}{.metadata.namespace}/{.metadata.name}: {.status.subdomain.hostname} serving {.status.subdomain.serving} ({.status.subdomain.reason}: {.status.subdomain.message}){"\\n"}{end}';
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const now = (await runKubectl(kubectl, ['get', 'projects', '-A', '-o', `jsonpath=${jsonpath}`])).trim();
    const lines = now === '' ? [] : now.split('\n');
    if (lines.length > 0 && lines.every((l) => l.includes(' serving True '))) {
      for (const line of lines) progress(`  ${line}`);
      return;
    }
    if (now !== last) {
      for (const line of lines) progress(`  ${line}`);
      last = now;
    }
    if (Date.now() >= deadline)
      throw new ExamplesNotReadyError(
        `the example Projects' subdomains do not serve after ${Math.round(timeoutMs / 1000)} s:\n${now}\n` +
          'inspect with: kubectl get projects -A -o yaml',
      );
    await sleep(500);
  }
}
