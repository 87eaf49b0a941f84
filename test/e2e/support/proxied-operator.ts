/**
 * What the fault tests share: an operator of the test's own whose ACME directory is the fault proxy
 * in front of the stack's Pebble (the stack's operator is stopped meanwhile and started again
 * afterwards), the proxy's record per hostname, and what a domain's TLS Secrets hold.
 */
import { afterAll, beforeAll } from 'vitest';
import { parsedSecret } from '../../../src/certificates/parsed-secret.js';
import { kube, sandbox, unique } from './cluster.js';
import {
  startAcmeFaultProxy,
  type AcmeExchange,
  type AcmeFaultProxy,
  type AcmeRequestKind,
} from './acme-fault-proxy.js';
import {
  killOperator,
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './stack-controller.js';

export interface ProxiedOperator {
  proxy(): AcmeFaultProxy;
  /** The operator running now. */
  operator(): OperatorProcess;
  /** The exchanges of `kind` about `hostname`, in arrival order. */
  exchangesFor(hostname: string, kind: AcmeRequestKind): AcmeExchange[];
  /** Stops the running operator (SIGTERM, or SIGKILL when `kill`) and starts a new one on the proxy. */
  replace(options?: { kill?: boolean; overrides?: Record<string, string> }): Promise<OperatorProcess>;
  /** SIGKILLs the running operator; `replace` starts the next. */
  kill(): Promise<void>;
}

/**
 * Registers beforeAll/afterAll hooks that start the proxy and an operator on it named
 * `<name>-<n>`, with `overrides` (flag → value) on the stack operator's command line.
 */
export function useProxiedOperator(name: string, overrides: Record<string, string> = {}): ProxiedOperator {
  let stack: ControllerCommand | undefined;
  let proxy: AcmeFaultProxy | undefined;
  let current: OperatorProcess | undefined;
  let started = 0;

  const theProxy = (): AcmeFaultProxy => {
    if (!proxy) throw new Error('the fault proxy did not start');
    return proxy;
  };
  const start = async (more: Record<string, string> = {}): Promise<OperatorProcess> => {
    if (!stack) throw new Error('the stack operator was not found');
    started += 1;
    current = await startOperator(stack, `${name}-${started}`, {
      '--acme-directory-url': theProxy().directoryUrl,
      ...overrides,
      ...more,
    });
    return current;
  };

  beforeAll(async () => {
    proxy = await startAcmeFaultProxy(sandbox.sandboxDir, sandbox.acmeDirectoryUrl, sandbox.acmeCaBundle);
    stack = await stopStackController();
    if (!stack) throw new Error('the stack operator was not found');
    await start();
  });

  afterAll(async () => {
    await runAll(
      // The proxy first: a request it still holds would keep the operator from exiting.
      async () => proxy?.stop(),
      async () => {
        if (current) await stopOperator(current);
      },
      () => restartStackController(stack),
    );
  });

  return {
    proxy: theProxy,
    operator() {
      if (!current) throw new Error('no operator runs');
      return current;
    },
    exchangesFor(hostname, kind) {
      return theProxy().exchanges.filter((x) => x.kind === kind && x.hostnames.includes(hostname));
    },
    async replace(options = {}) {
      if (current) await (options.kill === true ? killOperator(current) : stopOperator(current));
      return start(options.overrides);
    },
    async kill() {
      if (current) await killOperator(current);
    },
  };
}

/** What a namespace's `kubernetes.io/tls` Secrets hold. */
export interface TlsSecretFacts {
  name: string;
  serialNumber: string;
  dnsNames: string[];
  /** `tls.key` is the certificate's private key. */
  keyMatches: boolean;
}

/** Every `kubernetes.io/tls` Secret of `namespace`, read from the API server. */
export async function tlsSecrets(namespace: string): Promise<TlsSecretFacts[]> {
  const secrets = await kube().core.listNamespacedSecret({ namespace });
  return secrets.items
    .filter((s) => s.type === 'kubernetes.io/tls')
    .map((s) => {
      const parsed = parsedSecret(s);
      return {
        name: s.metadata?.name ?? '',
        serialNumber: parsed?.facts.serialNumber ?? '',
        dnsNames: parsed?.facts.dnsNames ?? [],
        keyMatches: parsed?.keyMatches ?? false,
      };
    });
}

/** A namespace name and the hostname `<label>.<namespace>.example` in it. */
export function uniqueHostname(prefix: string, label = 'www'): { ns: string; hostname: string } {
  const ns = unique(prefix);
  return { ns, hostname: `${label}.${ns}.example` };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `promise`, or a rejection naming `what` after `timeoutMs`. */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
