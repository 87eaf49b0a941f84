/**
 * Preparing the cluster for the operator: its CRDs and its namespace.
 */
import { realpath } from 'node:fs/promises';

import { SandboxError } from './errors.js';
import { runKubectl, type Kubectl } from './kubectl.js';

/**
 * `kubectl apply --server-side -f <crdsDir>`, then waits until every CRD is Established.
 *
 * @throws SandboxError when `crdsDir` does not exist; CommandFailedError when kubectl fails
 */
export async function installCrds(kubectl: Kubectl, crdsDir: string): Promise<void> {
  let dir: string;
  try {
    // kubectl does not follow a symlinked directory: hand it the real path.
    dir = await realpath(crdsDir);
  } catch {
    throw new SandboxError(`CRDs: ${crdsDir} does not exist`);
  }
  await runKubectl(kubectl, ['apply', '--server-side', '--force-conflicts', '-f', dir]);
  await runKubectl(kubectl, ['wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s']);
}

/**
 * Creates namespace `name` unless it exists.
 *
 * @throws CommandFailedError when kubectl fails
 */
export async function ensureNamespace(kubectl: Kubectl, name: string): Promise<void> {
  const manifest = JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  await runKubectl(kubectl, ['apply', '--server-side', '-f', '-'], { input: manifest });
}
