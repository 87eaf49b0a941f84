/**
 * The chart's alerts (charts/portico/templates/prometheusrule.yaml) with the real tools: rendered
 * by Helm, accepted by the API server against Prometheus Operator's own PrometheusRule CRD, and
 * unit-tested by promtool (`promtool test rules` on test/alerts/portico-rules.test.yaml, promtool
 * built by scripts/install-tools.sh), each alert with a case where it fires and one where it does not.
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { sandbox } from './support/cluster.js';
import {
  REPO,
  kubectl,
  parseManifests,
  run,
  runOk,
  template,
  toolsBin,
  type Manifest,
} from './support/helm.js';

/** The namespace the rules are rendered for: test/alerts/portico-rules.test.yaml selects it. */
const NAMESPACE = 'portico-system';
const TESTS = `${REPO}test/alerts/portico-rules.test.yaml`;
const ENABLED = [
  'metrics.prometheusRule.enabled=true',
  'rateLimit.enabled=true',
  'rateLimit.redis.url=redis://redis.redis:6379/0',
];

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
}
interface RuleGroup {
  name: string;
  rules: Rule[];
}
interface AlertTest {
  alertname: string;
  exp_alerts?: unknown[];
}
interface TestFile {
  rule_files: string[];
  tests: { name: string; alert_rule_test?: AlertTest[] }[];
}

async function renderRules(sets: readonly string[]): Promise<Manifest[]> {
  const out = await template(NAMESPACE, 'default-values.yaml', sets);
  expect(out.code, out.stderr).toBe(0);
  return parseManifests(out.stdout).filter((m) => m.kind === 'PrometheusRule');
}

let rule: Manifest;
let dir: string;

beforeAll(async () => {
  const rules = await renderRules(ENABLED);
  expect(rules).toHaveLength(1);
  rule = rules[0] as Manifest;
  dir = await mkdtemp(path.join(tmpdir(), 'portico-alert-rules-'));
}, 300_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the PrometheusRule', () => {
  it('is rendered only when metrics.prometheusRule.enabled, and without the rate-limit group when the service is off', async () => {
    expect(await renderRules([])).toHaveLength(0);
    const controllerOnly = await renderRules(['metrics.prometheusRule.enabled=true']);
    const groups = (controllerOnly[0]?.spec?.['groups'] ?? []) as RuleGroup[];
    expect(groups.map((g) => g.name)).toEqual(['portico-controller']);
  });

  it("is accepted by the API server against Prometheus Operator's PrometheusRule CRD", async () => {
    // The CRDs of the Prometheus Operator release the ServiceMonitor check uses, side by side.
    const serviceMonitors = (await runOk(`${REPO}scripts/fetch-servicemonitor-crd.sh`, [])).trim();
    const crd = path.join(path.dirname(serviceMonitors), 'monitoring.coreos.com_prometheusrules.yaml');
    const installed = await kubectl(['apply', '--server-side', '-f', crd]);
    expect(installed.code, installed.stderr).toBe(0);
    await kubectl(['wait', '--for=condition=Established', 'crd/prometheusrules.monitoring.coreos.com']);
    const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } };
    const created = await kubectl(['apply', '-f', '-'], { input: JSON.stringify(ns) });
    expect(created.code, created.stderr).toBe(0);
    const applied = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: JSON.stringify(rule) });
    expect(applied.code, applied.stderr).toBe(0);
  });

  it('passes promtool check rules and promtool test rules, every alert tested firing and quiet', async () => {
    const groups = (rule.spec?.['groups'] ?? []) as RuleGroup[];
    const tests = parse(await readFile(TESTS, 'utf8')) as TestFile;
    const rulesFile = path.join(dir, tests.rule_files[0] ?? 'portico-rules.yaml');
    await writeFile(rulesFile, stringify({ groups }));
    await copyFile(TESTS, path.join(dir, 'portico-rules.test.yaml'));
    const promtool = `${await toolsBin()}/promtool`;

    const checked = await run(promtool, ['check', 'rules', rulesFile]);
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
    const tested = await run(promtool, ['test', 'rules', 'portico-rules.test.yaml'], { cwd: dir });
    expect(tested.code, tested.stdout + tested.stderr).toBe(0);
    expect(tested.stdout).toContain('SUCCESS');

    const alerts = groups.flatMap((g) => g.rules.flatMap((r) => (r.alert ? [r.alert] : [])));
    expect(alerts).toEqual([
      'PorticoOperatorAbsent',
      'PorticoNoLeader',
      'PorticoCertificateExpiringSoon',
      'PorticoDomainNotReady',
      'PorticoAcmeRequestErrors',
      'PorticoAcmeRateLimited',
      'PorticoAcmeOrderBudgetNearlySpent',
      'PorticoRateLimitAbsent',
      'PorticoRateLimitFailingOpen',
      'PorticoRateLimitDegraded',
      'PorticoRateLimitLoadReportFailing',
    ]);
    const cases = tests.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const alert of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${alert} has a case where it fires`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${alert} has a case where it does not fire`,
      ).toBe(true);
    }
    // Every case names an alert of the rules (a renamed alert leaves no case behind).
    for (const c of cases) expect(alerts).toContain(c.alertname);
  });

  it('reads only metrics the running operator and rate-limit service export', async () => {
    const pages = await Promise.all(
      [sandbox.controllerMetricsUrl, sandbox.ratelimitMetricsUrl].map(async (u) => (await fetch(u)).text()),
    );
    const declared = new Set(
      pages.flatMap((p) => [...p.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] ?? '')),
    );
    const groups = (rule.spec?.['groups'] ?? []) as RuleGroup[];
    const read = new Set(
      groups.flatMap((g) =>
        g.rules.flatMap((r) => [...r.expr.matchAll(/\b(portico_[a-z0-9_]+)\b/g)].map((m) => m[1] ?? '')),
      ),
    );
    expect(read.size).toBeGreaterThanOrEqual(6);
    for (const name of read) expect(declared.has(name), `${name} is exported`).toBe(true);
  });
});
