/**
 * The CustomDomain CRD's validation, against a real API server: every hostname rule rejects what
 * src/domain/hostname.ts rejects, with the same message, and accepts what it accepts; the rules on
 * spec (service or redirect, redirect target, immutable hostname) and on service and redirect hold;
 * defaults, short names and printer columns are as documented.
 *
 * Talks to the e2e global setup's cluster (its injected `sandbox.kubeconfig`), else to the cluster of
 * KUBECONFIG, with kubectl (`$KUBECTL`, else `kubectl` on PATH).
 * Applies crds/portico.dev_customdomains.yaml first, so that it tests this checkout's CRD. Objects go
 * to the namespace `crd-validation`; all requests but one create are server-side dry runs.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, afterAll, describe, expect, inject, it } from 'vitest';
import { HOSTNAME_RULES, hostnameProblems } from '../../src/domain/hostname.js';
import type { SandboxEnv } from '../../src/sandbox/state.js';
import { BAD_HOSTNAMES, GOOD_HOSTNAMES } from '../fixtures/hostnames.js';
import { waitFor } from './support/cluster.js';

const KUBECTL = process.env.KUBECTL ?? 'kubectl';
const KUBECONFIG = (inject('sandbox') as SandboxEnv | undefined)?.kubeconfig ?? process.env.KUBECONFIG ?? '';
const NAMESPACE = 'crd-validation';
const CRD_FILE = fileURLToPath(new URL('../../crds/portico.dev_customdomains.yaml', import.meta.url));

/** The messages of the CEL rules on spec, as the CRD words them. */
const SPEC_MESSAGES = {
  serviceOrRedirect:
    'set spec.service (the Service in this namespace that serves the domain) or spec.redirect (the hostname the domain redirects to)',
  redirectToSelf:
    "redirect.to must differ from spec.hostname: a domain cannot redirect to itself; write the domain to send visitors to, e.g. the project's primary domain",
  immutableHostname:
    'hostname is immutable; to serve another hostname, create a new CustomDomain for it (and delete this one)',
  serviceName:
    "service.name must be a Service name: lowercase letters, digits and '-', starting with a letter and not ending with '-', e.g. shop-web",
  portNumber: 'service.port must be a port number from 1 to 65535, or a port name, e.g. http',
  portName:
    "service.port must be a port number, e.g. 80, or the name of a port of the Service (at most 15 characters of a-z, 0-9 and '-', with a letter), e.g. http",
  nameLength:
    "metadata.name must be at most 63 characters: Portico labels the objects it owns with the CustomDomain's name, and a label value is at most 63 characters (the hostname itself may be longer)",
} as const;

interface KubectlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs kubectl with `args`, `stdin` on its standard input; resolves with its exit code and output. */
function kubectl(args: readonly string[], stdin?: string): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const fullArgs = ['--kubeconfig', KUBECONFIG, ...args];
    const child = execFile(KUBECTL, fullArgs, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error !== null && typeof error.code !== 'number') {
        reject(new Error(`could not run ${KUBECTL}: ${error.message}`, { cause: error }));
        return;
      }
      resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr });
    });
    child.stdin?.end(stdin ?? '');
  });
}

async function kubectlOk(args: readonly string[], stdin?: string): Promise<string> {
  const result = await kubectl(args, stdin);
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed: ${result.stderr}`);
  return result.stdout;
}

type Spec = Record<string, unknown>;

function customDomain(name: string, spec: Spec): string {
  return JSON.stringify({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name, namespace: NAMESPACE },
    spec,
  });
}

/** Sends a CustomDomain as a server-side dry-run create. */
function dryRunCreate(name: string, spec: Spec): Promise<KubectlResult> {
  return kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], customDomain(name, spec));
}

const SERVICE = { name: 'shop-web', port: 80 };

/** Asserts that the API server rejected the object, with each of `messages` and no other hostname message. */
function expectRejected(result: KubectlResult, messages: readonly string[]): void {
  expect(result.code, `kubectl succeeded: ${result.stdout}`).not.toBe(0);
  expect(result.stderr).toContain('is invalid');
  for (const message of messages) expect(result.stderr).toContain(message);
  const others = HOSTNAME_RULES.map((r) => r.message).filter((m) => !messages.includes(m));
  for (const message of others) expect(result.stderr).not.toContain(message);
}

function expectAccepted(result: KubectlResult): Record<string, unknown> {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

/** A DNS-1123 object name for test case `i` of a group. */
function objectName(group: string, i: number): string {
  return `${group}-${i}`;
}

beforeAll(async () => {
  if (KUBECONFIG === '') {
    throw new Error(
      'no cluster: run this test in the e2e project (its global setup starts one) or set KUBECONFIG',
    );
  }
  await kubectlOk(['apply', '--server-side', '--force-conflicts', '-f', CRD_FILE]);
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', 'crd/customdomains.portico.dev']);
  await kubectlOk(
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } }),
  );
  // The API server takes a moment to serve a changed CRD's schema: wait until the last rule answers.
  const last = BAD_HOSTNAMES.at(-1);
  if (last === undefined) throw new Error('no bad hostnames');
  const message = HOSTNAME_RULES.find((r) => r.reason === last.reason)?.message ?? '';
  for (let attempt = 0; ; attempt++) {
    const result = await dryRunCreate('canary', { hostname: last.hostname, service: SERVICE });
    if (result.stderr.includes(message)) break;
    if (attempt >= 30)
      throw new Error(`the CRD's rules are not in effect: ${result.stderr || result.stdout}`);
    await sleep(1000);
  }
});

describe('spec.hostname', () => {
  it.each(BAD_HOSTNAMES.map((bad, i) => ({ ...bad, i })))(
    'rejects "$hostname" ($why) with the $reason message',
    async ({ hostname, i }) => {
      const result = await dryRunCreate(objectName('bad-hostname', i), { hostname, service: SERVICE });
      expectRejected(
        result,
        hostnameProblems(hostname).map((p) => p.message),
      );
    },
  );

  it.each(GOOD_HOSTNAMES.map((good, i) => ({ ...good, i })))(
    'accepts $hostname ($why)',
    async ({ hostname, i }) => {
      expectAccepted(await dryRunCreate(objectName('good-hostname', i), { hostname, service: SERVICE }));
    },
  );

  it('reports every rule a hostname breaks, as hostnameProblems does', async () => {
    const hostname = '2001:DB8::1';
    expect(hostnameProblems(hostname)).toHaveLength(2);
    const result = await dryRunCreate('two-problems', { hostname, service: SERVICE });
    expectRejected(
      result,
      hostnameProblems(hostname).map((p) => p.message),
    );
  });

  it('is immutable', async () => {
    const name = 'immutable-hostname';
    await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--ignore-not-found', '--wait=false']);
    await kubectlOk(
      ['create', '-f', '-'],
      customDomain(name, { hostname: 'old.example.com', service: SERVICE }),
    );
    try {
      const changed = await kubectl([
        'patch',
        'customdomain',
        name,
        '-n',
        NAMESPACE,
        '--dry-run=server',
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { hostname: 'new.example.com' } }),
      ]);
      expectRejected(changed, [SPEC_MESSAGES.immutableHostname]);
      const unchanged = await kubectl([
        'patch',
        'customdomain',
        name,
        '-n',
        NAMESPACE,
        '--dry-run=server',
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { service: { name: 'other-web' } } }),
      ]);
      expect(unchanged.stderr).toBe('');
      expect(unchanged.code).toBe(0);
    } finally {
      await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--wait=false']);
    }
  });
});

describe('spec.redirect', () => {
  it.each(BAD_HOSTNAMES.map((bad, i) => ({ ...bad, i })))(
    'rejects redirect.to "$hostname" ($why) with the $reason message',
    async ({ hostname, i }) => {
      const result = await dryRunCreate(objectName('bad-redirect', i), {
        hostname: 'old.example.com',
        redirect: { to: hostname },
      });
      expectRejected(
        result,
        hostnameProblems(hostname).map((p) => p.message),
      );
      if (hostname !== '') expect(result.stderr).toContain('spec.redirect.to');
    },
  );

  it.each(GOOD_HOSTNAMES.map((good, i) => ({ ...good, i })))(
    'accepts redirect.to $hostname ($why)',
    async ({ hostname, i }) => {
      const spec = { hostname: 'old.example.com', redirect: { to: hostname } };
      expectAccepted(await dryRunCreate(objectName('good-redirect', i), spec));
    },
  );

  it('defaults statusCode to 301 and needs no service', async () => {
    const object = expectAccepted(
      await dryRunCreate('redirect-default', {
        hostname: 'old.example.com',
        redirect: { to: 'example.com' },
      }),
    );
    expect(object.spec).toEqual({
      hostname: 'old.example.com',
      redirect: { to: 'example.com', statusCode: 301 },
    });
  });

  it.each([301, 302, 307, 308])('accepts statusCode %i', async (statusCode) => {
    const spec = { hostname: 'old.example.com', redirect: { to: 'example.com', statusCode } };
    expectAccepted(await dryRunCreate(`redirect-${statusCode}`, spec));
  });

  it('rejects another statusCode, naming the allowed ones', async () => {
    const spec = { hostname: 'old.example.com', redirect: { to: 'example.com', statusCode: 303 } };
    const result = await dryRunCreate('redirect-303', spec);
    expectRejected(result, [
      'spec.redirect.statusCode: Unsupported value: 303',
      '"301", "302", "307", "308"',
    ]);
  });

  it('rejects a redirect to the hostname itself', async () => {
    const spec = { hostname: 'www.example.com', redirect: { to: 'www.example.com' }, service: SERVICE };
    const result = await dryRunCreate('redirect-self', spec);
    expectRejected(result, [`spec.redirect.to: Invalid value`, SPEC_MESSAGES.redirectToSelf]);
  });

  it.each([
    { to: 'WWW.example.com', message: 'hostname must be lowercase, e.g. www.example.com' },
    {
      to: 'www.example.com.',
      message: 'hostname must not end with a dot; write www.example.com, not www.example.com.',
    },
  ])('rejects the hostname itself written as $to, by the hostname rules', async ({ to, message }) => {
    const spec = { hostname: 'www.example.com', redirect: { to } };
    const result = await dryRunCreate('redirect-self-spelled', spec);
    expectRejected(result, [message]);
  });

  it('rejects an update that points redirect.to at the hostname itself (docs/customdomains.md, RedirectToSelf)', async () => {
    const name = 'redirect-self-update';
    await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--ignore-not-found', '--wait=false']);
    await kubectlOk(
      ['create', '-f', '-'],
      customDomain(name, { hostname: 'old.example.com', redirect: { to: 'example.com' } }),
    );
    const patch = (to: string): Promise<KubectlResult> =>
      kubectl([
        'patch',
        'customdomain',
        name,
        '-n',
        NAMESPACE,
        '--dry-run=server',
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { redirect: { to } } }),
      ]);
    try {
      expectRejected(await patch('old.example.com'), [
        'spec.redirect.to: Invalid value',
        SPEC_MESSAGES.redirectToSelf,
      ]);
      const other = await patch('www.example.com');
      expect(other.stderr).toBe('');
      expect(other.code).toBe(0);
    } finally {
      await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--wait=false']);
    }
  });
});

describe('spec.service', () => {
  it('is required when there is no redirect', async () => {
    expectRejected(await dryRunCreate('no-service', { hostname: 'www.example.com' }), [
      SPEC_MESSAGES.serviceOrRedirect,
    ]);
  });

  it('defaults port to 80', async () => {
    const object = expectAccepted(
      await dryRunCreate('port-default', { hostname: 'www.example.com', service: { name: 'shop-web' } }),
    );
    expect(object.spec).toEqual({ hostname: 'www.example.com', service: { name: 'shop-web', port: 80 } });
  });

  it.each([1, 443, 65535, 'http', 'https-alt', 'h2c'])('accepts port %j', async (port) => {
    const spec = { hostname: 'www.example.com', service: { name: 'shop-web', port } };
    expectAccepted(await dryRunCreate(`port-${String(port)}`, spec));
  });

  it.each([0, 65536, -1])('rejects port %j', async (port) => {
    const spec = { hostname: 'www.example.com', service: { name: 'shop-web', port } };
    expectRejected(await dryRunCreate(`port-bad-${String(port)}`, spec), [SPEC_MESSAGES.portNumber]);
  });

  it.each(['HTTP', '80', 'web--ui', '-http', 'a-very-long-port-name', ''])(
    'rejects port name %j',
    async (port) => {
      const spec = { hostname: 'www.example.com', service: { name: 'shop-web', port } };
      expectRejected(await dryRunCreate('port-bad-name', spec), [SPEC_MESSAGES.portName]);
    },
  );

  it.each(['Shop-Web', 'shop_web', '1shop', 'shop-', 'shop.web'])('rejects name %j', async (name) => {
    const spec = { hostname: 'www.example.com', service: { name, port: 80 } };
    expectRejected(await dryRunCreate('bad-service-name', spec), [SPEC_MESSAGES.serviceName]);
  });
});

describe('metadata.name', () => {
  it('accepts 63 characters and rejects 64, saying why', async () => {
    const spec = { hostname: 'www.example.com', service: { name: 'shop-web' } };
    expectAccepted(await dryRunCreate('n'.repeat(63), spec));
    expectRejected(await dryRunCreate('n'.repeat(64), spec), [SPEC_MESSAGES.nameLength]);
  });
});

describe('kubectl get', () => {
  const name = 'printer-columns';

  afterAll(async () => {
    await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--ignore-not-found', '--wait=false']);
  });

  it('answers to the short names and the portico category, with the documented columns', async () => {
    await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--ignore-not-found', '--wait=false']);
    await kubectlOk(
      ['create', '-f', '-'],
      customDomain(name, { hostname: 'columns.example.com', service: SERVICE }),
    );
    for (const resource of ['cd', 'cdomain', 'customdomain', 'portico']) {
      const out = await kubectlOk([
        'get',
        resource,
        '-n',
        NAMESPACE,
        '--field-selector',
        `metadata.name=${name}`,
      ]);
      const header = out.split('\n')[0]?.trim().split(/\s+/);
      expect(header, resource).toEqual(['NAME', 'HOSTNAME', 'PHASE', 'READY', 'EXPIRES', 'AGE']);
      expect(out).toContain('columns.example.com');
    }
  });

  it('shows with -o wide the reason, the next attempt and the message of what holds the domain back', async () => {
    await kubectl(['delete', 'customdomain', name, '-n', NAMESPACE, '--ignore-not-found', '--wait=false']);
    await kubectlOk(
      ['create', '-f', '-'],
      customDomain(name, { hostname: 'wide.example.com', service: SERVICE }),
    );
    const ready = await waitFor('the operator to write the Ready condition', async () => {
      const out = await kubectlOk([
        'get',
        'customdomain',
        name,
        '-n',
        NAMESPACE,
        '-o',
        'jsonpath={.status.conditions[?(@.type=="Ready")].reason}',
      ]);
      return out.trim() === '' ? undefined : out.trim();
    });
    const out = await kubectlOk(['get', 'cd', name, '-n', NAMESPACE, '-o', 'wide']);
    const [head, row] = out.split('\n');
    expect(head?.trim()).toMatch(
      /^NAME\s+HOSTNAME\s+PHASE\s+READY\s+EXPIRES\s+REASON\s+ISSUER\s+NEXT ATTEMPT\s+MESSAGE\s+AGE$/,
    );
    expect(row).toContain(ready);
  });
});
