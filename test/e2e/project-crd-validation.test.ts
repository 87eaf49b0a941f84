/**
 * The Project CRD's validation, against a real API server (crds/portico.dev_projects.yaml;
 * docs/customdomains.md, "Projects"): each bad input is refused with the message a person reads, and
 * good input is stored with its defaults (redirect status 301, Service port 80). The hostname rules
 * are the CustomDomain's (checked rule by rule in crd-validation.test.ts; here one bad hostname per
 * field shows they are on each).
 *
 * Applies this checkout's CRD first. Objects go to the namespace `project-crd-validation`; every
 * request is a server-side dry run, so nothing is stored and no Project reaches the operator.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import type { SandboxEnv } from '../../src/sandbox/state.js';
import { MAX_PROJECT_HOSTNAMES } from '../../src/api/project.js';

const KUBECTL = process.env.KUBECTL ?? 'kubectl';
const KUBECONFIG = (inject('sandbox') as SandboxEnv | undefined)?.kubeconfig ?? process.env.KUBECONFIG ?? '';
const NAMESPACE = 'project-crd-validation';
const CRD_FILE = fileURLToPath(new URL('../../crds/portico.dev_projects.yaml', import.meta.url));

/** The messages of the CRD's rules, as it words them. */
const MESSAGES = {
  primaryIsRedirect:
    'domains.primary is also listed as a redirect from: a hostname either serves the project (the primary) or redirects to it; remove the primary from domains.redirects',
  duplicateFrom:
    'domains.redirects lists the same from more than once: list each hostname once, with the one to and status it redirects with',
  toNotOfProject:
    "a redirect's to is not a hostname of this project: a redirect goes to the primary; set to to domains.primary, or leave it out (it defaults to the primary)",
  toRedirects:
    "a redirect's to is a hostname that itself redirects: visitors would get two redirects, or a loop; set to to domains.primary, or leave it out (it defaults to the primary)",
  tooMany: `a project has at most ${MAX_PROJECT_HOSTNAMES} hostnames (the primary, the redirects and the www counterpart together); remove some, or split the domains over several projects`,
  status:
    'status must be a redirect status: 301 (Moved Permanently, the default), 302 (Found), 307 (Temporary Redirect) or 308 (Permanent Redirect)',
  lowercase: 'hostname must be lowercase, e.g. www.example.com',
  wwwListed:
    "with wwwRedirect, the primary's www counterpart (www.<primary>, or the primary without www.) already redirects to the primary with 301; remove it from domains.redirects, or set wwwRedirect to false to list it yourself",
  wwwNoDot:
    'wwwRedirect needs a counterpart that is a hostname: the primary without www. has no dot; set wwwRedirect to false',
} as const;

interface KubectlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function kubectl(args: readonly string[], stdin?: string): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      KUBECTL,
      ['--kubeconfig', KUBECONFIG, ...args],
      { timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') {
          reject(new Error(`could not run ${KUBECTL}: ${error.message}`, { cause: error }));
          return;
        }
        resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr });
      },
    );
    child.stdin?.end(stdin ?? '');
  });
}

type Domains = Record<string, unknown>;

/** Sends a Project with `domains` as a server-side dry-run create. */
function dryRunCreate(domains: Domains, name = 'shop'): Promise<KubectlResult> {
  const body = {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'Project',
    metadata: { name, namespace: NAMESPACE },
    spec: { service: { name: 'shop-web' }, domains },
  };
  return kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], JSON.stringify(body));
}

/** Asserts the API server refused the Project with `message`, and with no other rule's message. */
function expectRefused(result: KubectlResult, message: string): void {
  expect(result.code, `kubectl succeeded: ${result.stdout}`).not.toBe(0);
  expect(result.stderr).toContain('is invalid');
  expect(result.stderr).toContain(message);
  for (const other of Object.values(MESSAGES))
    if (other !== message) expect(result.stderr).not.toContain(other);
}

beforeAll(async () => {
  if (KUBECONFIG === '') throw new Error('no cluster: run this test in the e2e project or set KUBECONFIG');
  for (const args of [
    ['apply', '--server-side', '--force-conflicts', '-f', CRD_FILE],
    ['wait', '--for=condition=Established', '--timeout=60s', 'crd/projects.portico.dev'],
  ]) {
    const r = await kubectl(args);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
  }
  await kubectl(['create', 'namespace', NAMESPACE]);
  // The API server takes a moment to serve a changed CRD's schema: wait until a rule answers.
  for (let attempt = 0; ; attempt++) {
    const r = await dryRunCreate({ primary: 'a.example', redirects: [{ from: 'a.example' }] });
    if (r.stderr.includes(MESSAGES.primaryIsRedirect)) break;
    if (attempt >= 30) throw new Error(`the CRD's rules are not in effect: ${r.stderr || r.stdout}`);
    await sleep(1000);
  }
}, 90_000);

describe('Project: refused input', () => {
  it('a primary that is also a redirect source', async () => {
    expectRefused(
      await dryRunCreate({ primary: 'shop.example', redirects: [{ from: 'shop.example' }] }),
      MESSAGES.primaryIsRedirect,
    );
  });

  it('a redirect from listed twice', async () => {
    expectRefused(
      await dryRunCreate({
        primary: 'shop.example',
        redirects: [{ from: 'old.example' }, { from: 'old.example', status: 302 }],
      }),
      MESSAGES.duplicateFrom,
    );
  });

  it("a to that is not one of the project's hostnames", async () => {
    expectRefused(
      await dryRunCreate({
        primary: 'shop.example',
        redirects: [{ from: 'old.example', to: 'elsewhere.example' }],
      }),
      MESSAGES.toNotOfProject,
    );
  });

  it('a to that itself redirects (a chain, or a loop)', async () => {
    expectRefused(
      await dryRunCreate({
        primary: 'shop.example',
        redirects: [
          { from: 'a.example', to: 'b.example' },
          { from: 'b.example', to: 'a.example' },
        ],
      }),
      MESSAGES.toRedirects,
    );
  });

  it.each([300, 303, 200, 404])('status %i', async (status) => {
    const result = await dryRunCreate({
      primary: 'shop.example',
      redirects: [{ from: 'old.example', status }],
    });
    expectRefused(result, MESSAGES.status);
    expect(result.stderr).toContain('spec.domains.redirects[0].status');
  });

  it(`more than ${MAX_PROJECT_HOSTNAMES} hostnames`, async () => {
    const redirects = Array.from({ length: MAX_PROJECT_HOSTNAMES }, (_, i) => ({ from: `r${i}.example` }));
    expectRefused(await dryRunCreate({ primary: 'shop.example', redirects }), MESSAGES.tooMany);
  });

  it.each([
    ['www.shop.example', 'shop.example'],
    ['shop.example', 'www.shop.example'],
  ])('with wwwRedirect, the counterpart of %s (%s) listed as a redirect too', async (primary, twin) => {
    expectRefused(
      await dryRunCreate({ primary, wwwRedirect: true, redirects: [{ from: twin }] }),
      MESSAGES.wwwListed,
    );
  });

  it('wwwRedirect on www.<tld>, whose counterpart has no dot', async () => {
    expectRefused(await dryRunCreate({ primary: 'www.example', wwwRedirect: true }), MESSAGES.wwwNoDot);
  });

  it(`more than ${MAX_PROJECT_HOSTNAMES} hostnames, counting the www counterpart`, async () => {
    const redirects = Array.from({ length: MAX_PROJECT_HOSTNAMES - 1 }, (_, i) => ({
      from: `r${i}.example`,
    }));
    expectRefused(
      await dryRunCreate({ primary: 'shop.example', wwwRedirect: true, redirects }),
      MESSAGES.tooMany,
    );
    const accepted = await dryRunCreate({ primary: 'shop.example', wwwRedirect: false, redirects });
    expect(accepted.stderr).toBe('');
  });

  it.each([
    ['primary', { primary: 'Shop.example' }],
    ['redirects[0].from', { primary: 'shop.example', redirects: [{ from: 'Old.example' }] }],
    [
      'redirects[0].to',
      { primary: 'shop.example', redirects: [{ from: 'old.example', to: 'Shop.example' }] },
    ],
  ])('a hostname rule on %s', async (field, domains) => {
    const result = await dryRunCreate(domains);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`spec.domains.${field}`);
    expect(result.stderr).toContain(MESSAGES.lowercase);
  });

  it('a name longer than 63 characters', async () => {
    const result = await dryRunCreate({ primary: 'shop.example' }, 'p'.repeat(64));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('metadata.name must be at most 63 characters');
  });
});

describe('Project: accepted input', () => {
  it(`exactly ${MAX_PROJECT_HOSTNAMES} hostnames, with to the primary, defaults filled in`, async () => {
    const redirects = Array.from({ length: MAX_PROJECT_HOSTNAMES - 1 }, (_, i) => ({
      from: `r${i}.example`,
    }));
    redirects[0] = { from: 'r0.example', to: 'shop.example' } as { from: string };
    const result = await dryRunCreate({ primary: 'shop.example', redirects });
    expect(result.stderr).toBe('');
    const stored = JSON.parse(result.stdout) as {
      spec: {
        service: { port: number };
        domains: { redirects: { from: string; to?: string; status: number }[] };
      };
    };
    expect(stored.spec.service.port).toBe(80);
    expect(stored.spec.domains.redirects[0]).toEqual({ from: 'r0.example', to: 'shop.example', status: 301 });
    expect(stored.spec.domains.redirects[1]).toEqual({ from: 'r1.example', status: 301 });
  });

  it.each([301, 302, 307, 308])('status %i', async (status) => {
    const result = await dryRunCreate({
      primary: 'shop.example',
      redirects: [{ from: 'old.example', status }],
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});
