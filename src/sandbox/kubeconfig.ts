/**
 * The admin kubeconfig of the sandbox's API server, and reading any kubeconfig back for probes.
 */
import { writeFile } from 'node:fs/promises';

import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';

import { SandboxError } from './errors.js';
import type { ProbeOptions } from './readiness.js';

/** What goes into a client-certificate kubeconfig. */
export interface KubeconfigSpec {
  /** `https://127.0.0.1:<port>` */
  readonly server: string;
  readonly caPem: string;
  readonly clientCertPem: string;
  readonly clientKeyPem: string;
  /** Name of the cluster, user and context (default `portico-sandbox`). */
  readonly name?: string;
}

const b64 = (pem: string): string => Buffer.from(pem, 'utf8').toString('base64');

/** A kubeconfig (YAML) with one cluster, one client-certificate user and one current context. */
export function renderKubeconfig(spec: KubeconfigSpec): string {
  const name = spec.name ?? 'portico-sandbox';
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: spec.server, 'certificate-authority-data': b64(spec.caPem) } }],
    users: [
      {
        name,
        user: {
          'client-certificate-data': b64(spec.clientCertPem),
          'client-key-data': b64(spec.clientKeyPem),
        },
      },
    ],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  });
}

/** Writes `renderKubeconfig(spec)` to `file` with mode 0600 (it holds a private key). */
export async function writeKubeconfig(file: string, spec: KubeconfigSpec): Promise<void> {
  await writeFile(file, renderKubeconfig(spec), { mode: 0o600 });
}

/** Where a kubeconfig's current context points, and how to authenticate there. */
export interface ClusterAccess {
  /** The API server URL, without a trailing slash. */
  readonly server: string;
  readonly requestOptions: ProbeOptions;
}

/**
 * Reads a kubeconfig (any auth kind @kubernetes/client-node supports) for its current cluster.
 *
 * @throws SandboxError when the file cannot be read or has no current cluster
 */
export async function clusterAccess(kubeconfigPath: string): Promise<ClusterAccess> {
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(kubeconfigPath);
  } catch (err: unknown) {
    throw new SandboxError(
      `cannot read kubeconfig ${kubeconfigPath}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new SandboxError(`kubeconfig ${kubeconfigPath} has no current cluster`);
  const options: ProbeOptions = {};
  await kc.applyToHTTPSOptions(options);
  return { server: cluster.server.replace(/\/+$/, ''), requestOptions: options };
}
