/**
 * The kubectl plugin as users run it: the built dist/kubectl-plugin/cli.js, found by the real
 * kubectl (the stack's, built by scripts/install-tools.sh) as the executable `kubectl-portico` on
 * PATH, against the e2e stack's API server and operator.
 */
import { chmod, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/kubectl-plugin/format.js';
import {
  createCustomDomain,
  createProject,
  customDomainApi,
  dns,
  getCustomDomain,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { REPO, run, toolsBin, type RunResult } from './support/helm.js';

const PLUGIN = `${REPO}dist/kubectl-plugin/cli.js`;
let pathDir = '';

/**
 * `kubectl portico <args>` through the real kubectl, with KUBECONFIG set (kubectl refuses flags
 * before a plugin's name, so none is put there).
 */
async function portico(args: readonly string[]): Promise<RunResult> {
  const env = {
    ...process.env,
    KUBECONFIG: sandbox.kubeconfig,
    // kubectl-portico first, then the node that runs these tests (its shebang is `env node`).
    PATH: [pathDir, dirname(process.execPath), process.env.PATH ?? ''].join(':'),
  };
  return run(`${await toolsBin()}/kubectl`, ['portico', ...args], { env, timeoutMs: 20_000 });
}

const live = unique('plugin-live');
const free = unique('plugin-free');
const caa = unique('plugin-caa');
const liveHost = `www.${live}.example`;
const freeHost = `www.${free}.example`;
const caaZone = `${caa}.example`;
const caaHost = `www.${caaZone}`;

beforeAll(async () => {
  pathDir = await mkdtemp(join(tmpdir(), 'portico-plugin-'));
  // What npm does for a package's bin: an executable named after the bin, linked to its file.
  await chmod(PLUGIN, 0o755);
  await symlink(PLUGIN, join(pathDir, 'kubectl-portico'));
  await Promise.all([
    createProject(live),
    createProject(free, { plan: 'free' }),
    dns.setCname(liveHost, sandbox.platformCnameTarget),
    dns.setCname(freeHost, sandbox.platformCnameTarget),
    createProject(caa),
    dns.setCname(caaHost, sandbox.platformCnameTarget),
    // CAA at the zone, which the lookup climbs to: only another CA may issue.
    dns.post('/add-caa', { host: caaZone, policies: [{ tag: 'issue', value: 'digicert.com' }] }),
  ]);
  await createCustomDomain(live, 'www', { hostname: liveHost, service: { name: 'web' } });
  await createCustomDomain(free, 'www', { hostname: freeHost, service: { name: 'web' } });
  await createCustomDomain(caa, 'www', { hostname: caaHost, service: { name: 'web' } });
  await Promise.all([
    waitForCondition(live, 'www', 'Ready', 'True', undefined, 60_000),
    waitForCondition(free, 'www', 'Accepted', 'False', 'PlanNotEligible'),
    waitForCondition(caa, 'www', 'CertificateReady', 'False', 'CAAForbidsIssuance'),
  ]);
});

afterAll(async () => {
  if (pathDir) await rm(pathDir, { recursive: true, force: true });
});

describe('kubectl portico status', () => {
  it("prints a Ready domain's conditions, DNS, certificate and Events", async () => {
    const cd = await getCustomDomain(live, 'www');
    const cert = cd.status?.certificate;
    if (!cert) throw new Error('the Ready domain has no status.certificate');

    const { code, stdout, stderr } = await portico(['status', 'www', '-n', live]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toContain(`CustomDomain ${live}/www: ${liveHost}`);
    expect(stdout).toContain('Phase: Live');
    for (const [type, reason] of [
      ['Accepted', 'Accepted'],
      ['DNSVerified', 'RecordMatches'],
      ['CertificateReady', 'Issued'],
      ['Routed', 'RoutesReady'],
      ['Ready', 'Live'],
    ]) {
      expect(stdout).toMatch(new RegExp(`\\n  ${type} +True +${reason} +\\d+[smhd]`));
    }
    expect(stdout).toContain(`wanted:  CNAME ${liveHost} -> ${sandbox.platformCnameTarget}`);
    expect(stdout).toContain(`found:   CNAME ${liveHost} -> ${sandbox.platformCnameTarget}`);
    expect(stdout).toContain(`next check: ${cd.status?.observed?.nextCheckAt ?? 'missing'}`);
    expect(stdout).toMatch(/secret: +www-tls\n/);
    expect(stdout).toContain(cert.serialNumber);
    expect(stdout).toContain(cert.issuer);
    expect(stdout).toContain(`notAfter:     ${cert.notAfter} (in `);
    expect(stdout).toContain(`renewalTime:  ${cert.renewalTime} (in `);
    // The operator's Events on this domain, from the core Events API (the Normal one names Live).
    expect(stdout).toMatch(
      /Events \(last 10, newest last\):\n +AGE +TYPE +REASON +MESSAGE\n(.*\n)* +\S+ +Normal +Live /,
    );
  });

  it('prints the same story as JSON with -o json', async () => {
    const { code, stdout } = await portico(['status', 'www', '--namespace', live, '-o', 'json']);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as StatusReport;
    expect(report.conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Accepted=True',
      'DNSVerified=True',
      'CertificateReady=True',
      'Routed=True',
      'Ready=True',
    ]);
    expect(report.certificate?.serialNumber).toBe(
      (await getCustomDomain(live, 'www')).status?.certificate?.serialNumber,
    );
    expect(report.events.some((e) => e.reason === 'Live')).toBe(true);
  });

  it('exits 1 and names the namespace searched for a domain that does not exist, 2 for a usage error', async () => {
    const missing = await portico(['status', 'nope', '-n', live, '--kubeconfig', sandbox.kubeconfig]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`customdomain "nope" not found in namespace "${live}"`);
    const usage = await portico(['status']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('no CustomDomain name given');
  });
});

describe('kubectl portico verify', () => {
  it('sets portico.dev/verify-requested-at to now, and the operator acts on it', async () => {
    await kube().custom.patchNamespacedCustomObject({
      ...customDomainApi,
      namespace: live,
      name: 'www',
      body: [{ op: 'add', path: '/metadata/annotations', value: { 'example.net/keep': 'yes' } }],
    });
    const before = Date.now();
    const { code, stdout } = await portico(['verify', 'www', '-n', live]);
    expect(code).toBe(0);
    const cd = await getCustomDomain(live, 'www');
    const value = cd.metadata.annotations?.['portico.dev/verify-requested-at'] ?? '';
    expect(value).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Date.parse(value)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(Date.parse(value)).toBeLessThanOrEqual(Date.now());
    expect(stdout).toContain(`portico.dev/verify-requested-at=${value} set (was not set)`);
    // A merge patch: the domain's other annotations stay.
    expect(cd.metadata.annotations?.['example.net/keep']).toBe('yes');
    await waitFor('the operator to act on the verify request', async () =>
      (await getCustomDomain(live, 'www')).status?.lastVerifyRequest === value ? true : undefined,
    );
  });
});

describe('kubectl portico explain', () => {
  it('names the reason that holds a free-plan domain back, what it means and the fix', async () => {
    const { code, stdout } = await portico(['explain', 'www', '-n', free]);
    expect(code).toBe(0);
    expect(stdout).toContain(`CustomDomain ${free}/www: ${freeHost}`);
    expect(stdout).toContain('Held back by: Accepted=False, reason PlanNotEligible (Warning)');
    expect(stdout).toMatch(/Message: +.*free plan/);
    expect(stdout).toContain(
      'Meaning:      custom domains need Pro or above (docs/customdomains.md, "Conditions and reasons")',
    );
    expect(stdout).toContain(`Fix:          Upgrade the project to Pro or above`);
    expect(stdout).toContain(`kubectl get namespace ${free} --show-labels`);
  });

  it('names the CAA record that blocks a domain, the fix, and the next attempt (status)', async () => {
    const explained = await portico(['explain', 'www', '-n', caa]);
    expect(explained.code).toBe(0);
    expect(explained.stdout).toContain(
      'Held back by: CertificateReady=False, reason CAAForbidsIssuance (Warning)',
    );
    expect(explained.stdout).toContain(`CAA ${caaZone} 0 issue "digicert.com"`);
    expect(explained.stdout).toContain("Meaning:      CAA records exclude the platform's CA (RFC 8659)");
    expect(explained.stdout).toContain(`Fix:          Add the CAA record the message names`);
    expect(explained.stdout).toContain(`kubectl portico verify www -n ${caa}`);

    const status = await portico(['status', 'www', '-n', caa]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain('Phase: Failed');
    expect(status.stdout).toContain('none issued yet');
    expect(status.stdout).toMatch(/next attempt: \d{4}-\d\d-\d\dT[\d:.]+Z \((in \S+|now|\S+ ago)\)/);
    expect(status.stdout).toMatch(/ +\S+ +Warning +CAAForbidsIssuance /);
  });

  it('says a Live domain is Live', async () => {
    const { code, stdout } = await portico(['explain', 'www', '-n', live]);
    expect(code).toBe(0);
    expect(stdout).toContain('the domain is Live');
  });
});
