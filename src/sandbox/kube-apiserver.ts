/**
 * kube-apiserver, started the way controller-runtime's envtest starts it
 * (pkg/internal/testing/controlplane/apiserver.go), but with a fixed sandbox cert directory and RBAC
 * authorization, so a ServiceAccount token gets exactly the rights its RBAC grants.
 */
import { CERT_FILES, type SandboxCertificates } from './certificates.js';
import { clusterAccess, writeKubeconfig } from './kubeconfig.js';
import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { httpProbe, waitUntilReady } from './readiness.js';

export const KUBE_APISERVER = 'kube-apiserver';

/** Where the API server listens and what it stores into. */
export interface KubeApiserverOptions {
  readonly securePort: number;
  /** etcd's client URL, `http://127.0.0.1:<port>`. */
  readonly etcdUrl: string;
  /**
   * The ServiceAccount admission plugin on (default off): Pods get their ServiceAccount's token
   * volume, and are refused until the namespace's ServiceAccount exists. On with a node
   * (`sandbox up --kubelet`), whose kube-controller-manager creates each namespace's `default`
   * ServiceAccount; off otherwise, as envtest runs it.
   */
  readonly serviceAccountAdmission?: boolean;
}

/** kube-apiserver's command-line flags. */
export function kubeApiserverArgs(paths: SandboxPaths, options: KubeApiserverOptions): string[] {
  return [
    `--etcd-servers=${options.etcdUrl}`,
    `--secure-port=${options.securePort}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    // Since 1.3x the endpoint reconcilers refuse a loopback advertise address; with nothing running
    // in-cluster, the `kubernetes` Service needs no endpoints.
    '--endpoint-reconciler-type=none',
    `--cert-dir=${paths.certsDir}`,
    `--tls-cert-file=${paths.cert(CERT_FILES.apiServerCert)}`,
    `--tls-private-key-file=${paths.cert(CERT_FILES.apiServerKey)}`,
    `--client-ca-file=${paths.cert(CERT_FILES.clusterCaCert)}`,
    // How it authenticates to a kubelet (`kubectl logs`, `exec`; `sandbox up --kubelet`): the admin's
    // client certificate, which the kubelet's webhook authorizer lets through (system:masters).
    `--kubelet-client-certificate=${paths.cert(CERT_FILES.adminCert)}`,
    `--kubelet-client-key=${paths.cert(CERT_FILES.adminKey)}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    '--authorization-mode=RBAC',
    `--service-account-issuer=https://127.0.0.1:${options.securePort}/`,
    `--service-account-key-file=${paths.cert(CERT_FILES.serviceAccountPub)}`,
    `--service-account-signing-key-file=${paths.cert(CERT_FILES.serviceAccountKey)}`,
    // envtest's choice: no kube-controller-manager creates the default ServiceAccount of a namespace.
    ...(options.serviceAccountAdmission === true ? [] : ['--disable-admission-plugins=ServiceAccount']),
  ];
}

/**
 * A probe that is true when the API server of `kubeconfigPath`'s current context answers
 * `GET /readyz` with 200, authenticating as that kubeconfig's user.
 */
export function apiServerReadyProbe(kubeconfigPath: string): () => Promise<true | string> {
  return async () => {
    try {
      const access = await clusterAccess(kubeconfigPath);
      return await httpProbe(`${access.server}/readyz`, access.requestOptions)();
    } catch (err: unknown) {
      return err instanceof Error ? err.message : String(err);
    }
  };
}

/**
 * Writes `<dir>/kubeconfig` (admin client certificate, CN=portico-admin, O=system:masters), starts
 * kube-apiserver and waits until `/readyz` answers 200.
 *
 * @param binary absolute path of the kube-apiserver binary
 * @throws ComponentStartError when it exits or is not ready within 90 s
 */
export async function startKubeApiserver(
  paths: SandboxPaths,
  binary: string,
  certs: SandboxCertificates,
  options: KubeApiserverOptions,
): Promise<{ process: StartedProcess; server: string }> {
  const server = `https://127.0.0.1:${options.securePort}`;
  await writeKubeconfig(paths.kubeconfig, {
    server,
    caPem: certs.clusterCa.certPem,
    clientCertPem: certs.admin.certPem,
    clientKeyPem: certs.admin.keyPem,
  });
  const proc = await startDetached(paths, {
    name: KUBE_APISERVER,
    command: binary,
    args: kubeApiserverArgs(paths, options),
  });
  await waitUntilReady(proc, apiServerReadyProbe(paths.kubeconfig), { timeoutMs: 90_000, intervalMs: 300 });
  return { process: proc, server };
}
