/**
 * The chart's Grafana dashboard (charts/portico/dashboards/portico.json, in a ConfigMap for
 * Grafana's dashboard sidecar behind metrics.grafanaDashboard.enabled). No JSON schema of Grafana's
 * dashboard model can be had from the npm registry without a new dependency (Grafana keeps it as
 * CUE and TypeScript types), so this checks what Grafana needs to load and draw it: the sidecar
 * label, a datasource variable every panel and query uses, unique panel ids, grid positions inside
 * the 24-column grid that do not overlap, a refId per query; every query parses as PromQL
 * (`promtool check rules` on a throwaway rule file); and every metric it reads is one the
 * operator or the rate-limit service of the running stack exports.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { sandbox } from './support/cluster.js';
import { CHART, parseManifests, run, template, toolsBin, type Manifest } from './support/helm.js';

interface Target {
  refId?: string;
  expr?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id?: number;
  type?: string;
  title?: string;
  gridPos?: { x: number; y: number; w: number; h: number };
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
}
interface Dashboard {
  title?: string;
  uid?: string;
  schemaVersion?: number;
  templating?: { list?: { name?: string; type?: string; query?: string }[] };
  panels?: Panel[];
}

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };

async function renderDashboards(sets: readonly string[]): Promise<Manifest[]> {
  const out = await template('portico-system', 'default-values.yaml', sets);
  expect(out.code, out.stderr).toBe(0);
  return parseManifests(out.stdout).filter(
    (m) => m.kind === 'ConfigMap' && m.metadata.labels?.['grafana_dashboard'] !== undefined,
  );
}

/** The metric names a PromQL expression reads (identifiers followed by `{` or `[`, or standing alone as a selector). */
function metricNames(expr: string): string[] {
  const names = new Set<string>();
  for (const m of expr.matchAll(/\b(portico_[a-z0-9_]+|process_[a-z0-9_]+|nodejs_[a-z0-9_]+)\b/g)) {
    names.add((m[1] ?? '').replace(/_(bucket|count|sum)$/, ''));
  }
  return [...names];
}

let dashboard: Dashboard;
let configMap: Manifest;
let dir: string;

beforeAll(async () => {
  const rendered = await renderDashboards(['metrics.grafanaDashboard.enabled=true']);
  expect(rendered).toHaveLength(1);
  configMap = rendered[0] as Manifest;
  const data = configMap['data'] as Record<string, string>;
  dashboard = JSON.parse(data['portico.json'] ?? '') as Dashboard;
  dir = await mkdtemp(path.join(tmpdir(), 'portico-dashboard-'));
}, 300_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the Grafana dashboard', () => {
  it('is a ConfigMap with the sidecar label only when enabled, in the namespace asked for', async () => {
    expect(await renderDashboards([])).toHaveLength(0);
    expect(configMap.metadata.labels?.['grafana_dashboard']).toBe('1');
    expect(configMap.metadata.namespace).toBe('portico-system');
    const elsewhere = await renderDashboards([
      'metrics.grafanaDashboard.enabled=true',
      'metrics.grafanaDashboard.namespace=monitoring',
      'metrics.grafanaDashboard.annotations.grafana_folder=Portico',
    ]);
    expect(elsewhere[0]?.metadata.namespace).toBe('monitoring');
    expect((elsewhere[0]?.metadata as { annotations?: Record<string, string> }).annotations).toEqual({
      grafana_folder: 'Portico',
    });
    // The ConfigMap carries the file as committed.
    const file = await readFile(`${CHART}/dashboards/portico.json`, 'utf8');
    expect(JSON.parse(file)).toEqual(dashboard);
  });

  it('has what Grafana needs: a uid, a datasource variable, unique panel ids, grid positions that do not overlap', () => {
    expect(dashboard.title).toBe('Portico');
    expect(dashboard.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating?.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }),
    );
    const panels = dashboard.panels ?? [];
    expect(panels.length).toBeGreaterThan(10);
    const ids = panels.map((p) => p.id);
    expect(ids.every((id) => Number.isInteger(id) && (id ?? 0) > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const panel of panels) {
      const g = panel.gridPos;
      expect(g, panel.title).toBeDefined();
      if (!g) continue;
      for (const v of [g.x, g.y, g.w, g.h]) expect(Number.isInteger(v) && v >= 0, panel.title).toBe(true);
      expect(g.w >= 1 && g.h >= 1 && g.x + g.w <= 24, panel.title).toBe(true);
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${panel.title ?? ''} overlaps another panel at ${x},${y}`).toBe(
            false,
          );
          cells.add(`${x},${y}`);
        }
      if (panel.type === 'row') continue;
      expect(panel.title, `panel ${panel.id ?? 0}`).toBeTruthy();
      expect(panel.datasource, panel.title).toEqual(DATASOURCE);
      const targets = panel.targets ?? [];
      expect(targets.length, panel.title).toBeGreaterThan(0);
      expect(new Set(targets.map((t) => t.refId)).size, panel.title).toBe(targets.length);
      for (const t of targets) {
        expect(t.datasource, panel.title).toEqual(DATASOURCE);
        expect(t.expr, panel.title).toBeTruthy();
      }
    }
  });

  it('has queries that parse as PromQL (promtool check rules) and read only metrics the running stack exports', async () => {
    const rules = (dashboard.panels ?? []).flatMap((p) =>
      (p.targets ?? []).map((t) => ({
        record: `dashboard:panel_${p.id ?? 0}_${t.refId ?? ''}`,
        // Grafana's interval variables become a fixed range for the check.
        expr: (t.expr ?? '').replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m'),
      })),
    );
    const file = path.join(dir, 'dashboard-queries.yaml');
    await writeFile(file, stringify({ groups: [{ name: 'portico-dashboard', rules }] }));
    const checked = await run(`${await toolsBin()}/promtool`, ['check', 'rules', file]);
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).toContain(`SUCCESS: ${rules.length} rules found`);

    // A metric is exported when its page declares it (`# TYPE name`), with samples or not yet.
    const pages = await Promise.all(
      [sandbox.controllerMetricsUrl, sandbox.ratelimitMetricsUrl].map(async (u) => (await fetch(u)).text()),
    );
    const declared = new Set(
      pages.flatMap((p) => [...p.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] ?? '')),
    );
    const read = new Set(rules.flatMap((r) => metricNames(r.expr)));
    expect(read.size).toBeGreaterThan(10);
    for (const name of read) expect(declared.has(name), `${name} is exported`).toBe(true);
  });
});
