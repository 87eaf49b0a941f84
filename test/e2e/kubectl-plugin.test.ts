/**
 * The kubectl plugin as users run it: the built dist/kubectl-plugin/cli.js, found by the real
 * kubectl (the stack's, built by scripts/install-tools.sh) as the executable `kubectl-portico` on
 * PATH, against the e2e stack's API server and operator.
 */
import { chmod, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { Project } from '../../src/api/project.js';
import type { StatusReport } from '../../src/kubectl-plugin/format.js';
import type { PolicyReport, ProjectReport } from '../../src/kubectl-plugin/resources.js';
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
import { createPolicy, getPolicy, waitForPolicyCondition } from './ratelimit-helpers.js';

const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;

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
const proj = unique('plugin-proj');
const projPrimary = `www.${proj}.example`;
const projOld = `old.${proj}.example`;

async function getProject(): Promise<Project> {
  return (await kube().custom.getNamespacedCustomObject({
    ...projectApi,
    namespace: proj,
    name: 'site',
  })) as Project;
}

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
    createProject(proj),
    dns.setCname(projPrimary, sandbox.platformCnameTarget),
    dns.setCname(projOld, sandbox.platformCnameTarget),
  ]);
  await kube().custom.createNamespacedCustomObject({
    ...projectApi,
    namespace: proj,
    body: {
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'Project',
      metadata: { name: 'site', namespace: proj },
      spec: {
        service: { name: 'web', port: 80 },
        domains: { primary: projPrimary, redirects: [{ from: projOld, status: 308 }] },
      },
    },
  });
  await createPolicy(live, 'api', {
    plans: [
      { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
      { name: 'pro', requestsPerMinute: 600, requestsPerDay: 100000 },
    ],
    defaultPlan: 'free',
    overrides: [{ keyId: 'key-42', requestsPerMinute: 5000, requestsPerDay: 1000000 }],
  });
  await createCustomDomain(live, 'www', { hostname: liveHost, service: { name: 'web' } });
  await createCustomDomain(free, 'www', { hostname: freeHost, service: { name: 'web' } });
  await createCustomDomain(caa, 'www', { hostname: caaHost, service: { name: 'web' } });
  await Promise.all([
    waitForCondition(live, 'www', 'Ready', 'True', undefined, 60_000),
    waitForCondition(free, 'www', 'Accepted', 'False', 'PlanNotEligible'),
    waitForCondition(caa, 'www', 'CertificateReady', 'False', 'CAAForbidsIssuance'),
    waitForPolicyCondition(live, 'api', 'Accepted', 'True'),
    waitFor(
      'Project site Ready=True',
      async () => {
        const p = await getProject();
        const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
        return p.status?.observedGeneration === p.metadata.generation && ready?.status === 'True'
          ? true
          : undefined;
      },
      180_000,
    ),
  ]);
}, 240_000);

afterAll(async () => {
  // The Project first, so that the operator does not re-create what the file clean-up deletes.
  await kube()
    .custom.deleteNamespacedCustomObject({ ...projectApi, namespace: proj, name: 'site' })
    .catch(() => undefined);
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

describe('kubectl portico status of a Project', () => {
  it("prints the primary, each hostname's role, phase and DNS record to create, and Ready", async () => {
    const { code, stdout, stderr } = await portico(['status', 'project', 'site', '-n', proj]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`^Project ${proj}/site \\(generation 1, observed 1\\)\n`));
    expect(stdout).toContain(`Primary: ${projPrimary} (serving)\n`);
    expect(stdout).toMatch(/\nReady: {3}True, reason Live: /);
    expect(stdout).toContain('Service: web:80\n');
    expect(stdout).toMatch(
      new RegExp(`\n  ${projPrimary.replaceAll('.', '\\.')} +Primary +- +Live +True +Live\n`),
    );
    expect(stdout).toMatch(
      new RegExp(
        `\n  ${projOld.replaceAll('.', '\\.')} +Redirect +${projPrimary.replaceAll('.', '\\.')} \\(308\\) +Live +True +Live\n`,
      ),
    );
    expect(stdout).toContain(
      `  ${projPrimary}:\n    wanted:  CNAME ${projPrimary} -> ${sandbox.platformCnameTarget}`,
    );
    expect(stdout).toContain(
      `  ${projOld}:\n    wanted:  CNAME ${projOld} -> ${sandbox.platformCnameTarget}`,
    );
    expect(stdout).toMatch(/\nConditions:\n +TYPE +STATUS +REASON +AGE\n +Ready +True +Live /);
  });

  it('prints the same report as YAML and JSON, with every status field the operator wrote', async () => {
    const yaml = await portico(['status', 'proj/site', '-n', proj, '-o', 'yaml']);
    const json = await portico(['status', 'projects.portico.dev', 'site', '-n', proj, '-o', 'json']);
    expect([yaml.code, json.code]).toEqual([0, 0]);
    const fromYaml = parse(yaml.stdout) as ProjectReport;
    const fromJson = JSON.parse(json.stdout) as ProjectReport;
    // Ages are relative to each run's clock; everything else is the same object read twice.
    const withoutAges = (r: ProjectReport): unknown => ({
      ...r,
      conditions: r.conditions.map((c) => ({ ...c, age: '' })),
      ready: { ...r.ready, age: '' },
      events: r.events.map((e) => ({ ...e, age: '' })),
    });
    expect(withoutAges(fromYaml)).toEqual(withoutAges(fromJson));

    const project = await getProject();
    expect(fromYaml.primary).toBe(projPrimary);
    expect(fromYaml.servingPrimary).toBe(project.status?.servingPrimary);
    expect(fromYaml.redirects).toEqual([{ from: projOld, to: projPrimary, status: 308 }]);
    expect(fromYaml.ready).toMatchObject({ type: 'Ready', status: 'True', reason: 'Live' });
    expect(fromYaml.hostnames.map((h) => [h.hostname, h.role, h.phase, h.ready])).toEqual(
      (project.status?.domains ?? []).map((d) => [d.hostname, d.role, d.phase, d.ready]),
    );
    expect(fromYaml.hostnames[0]?.dnsRecords).toEqual(project.status?.domains?.[0]?.dnsRecords);
    // Each status field is in the report: known ones in their place, the others under otherStatus.
    const known = ['observedGeneration', 'servingPrimary', 'hostnameCount', 'domains', 'conditions'];
    for (const [key, value] of Object.entries(project.status ?? {})) {
      if (!known.includes(key)) expect(fromYaml.otherStatus[key], key).toEqual(value);
    }
  });

  it('exits 1 and names the namespace searched for a Project that does not exist', async () => {
    const missing = await portico(['status', 'project', 'nope', '-n', proj]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`project "nope" not found in namespace "${proj}"`);
  });
});

describe('kubectl portico status of a RateLimitPolicy', () => {
  it('prints its domain, conditions, plans and override, as text and as YAML', async () => {
    const policy = await getPolicy(live, 'api');
    const text = await portico(['status', 'ratelimitpolicy', 'api', '-n', live]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(
      `RateLimitPolicy ${live}/api: domain ${live}/api (generation 1, observed 1)`,
    );
    expect(text.stdout).toMatch(/\n {2}Accepted +True +\S+ +\d+[smhd]\n/);
    expect(text.stdout).toMatch(/\n {2}free \(default\) +60 +1000\n {2}pro +600 +100000\n/);
    expect(text.stdout).toMatch(/\n {2}key-42 +5000 +1000000\n/);
    expect(text.stdout).toContain('Ban: none (keys are never banned)');
    expect(text.stdout).toContain('Checks without key_id: LimitByRemoteAddress');
    expect(text.stdout).toContain('Targets: none (the gateway is wired by hand)');

    const yaml = await portico(['status', 'rlp/api', '-n', live, '-o', 'yaml']);
    expect(yaml.code).toBe(0);
    const report = parse(yaml.stdout) as PolicyReport;
    expect(report.domain).toBe(policy.status?.domain);
    expect(report.conditions.map((c) => [c.type, c.status, c.reason])).toEqual(
      ['Accepted', 'Enforced', 'Attached'].flatMap((type) => {
        const c = policy.status?.conditions?.find((x) => x.type === type);
        return c === undefined ? [] : [[c.type, c.status, c.reason]];
      }),
    );
    expect(report.plans).toEqual(policy.spec.plans);
  });

  it('refuses verify on a RateLimitPolicy as a usage error', async () => {
    const refused = await portico(['verify', 'rlp', 'api', '-n', live]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('verify: works on CustomDomains only, not on a RateLimitPolicy');
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
