/**
 * Plots the JSON reports of `bench:scale` (test/bench/scale.ts, its --json file) against N, the
 * number of CustomDomains of each run, as one PNG figure for docs/performance.md: on the left the
 * operator's RSS (MiB), its peak during the ramp and its mean over the steady window; on the right
 * the seconds from the first create to the last Ready, with the p50 and p99 of each domain's time to
 * Ready. Both N axes and the time axis are logarithmic (N is 100, 1,000, 10,000). A caption names the
 * machine(s) and the commit(s) of the reports. Not part of `npm test`.
 *
 *   npm run bench:plot -- scale-100.json scale-1000.json scale-10000.json
 *   npm run bench:plot -- /tmp/scale-*.json --out /tmp/scale.png
 *
 * Reads each report's `options.domains` (N), `ramp.peakRssBytes`, `steady.meanRssBytes`,
 * `ramp.durationSeconds`, `ramp.timeTo.Ready` (p50, p99), `ramp.ready` and `ramp.timedOut`, and
 * `machine`. Several reports of one N are drawn as points each, and the line goes through their
 * median. Writes the PNG to --out (default docs/performance-scale.png); the chart is drawn by
 * Vega-Lite to an SVG, which resvg rasterises with the machine's fonts (DejaVu Sans when there).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Resvg } from '@resvg/resvg-js';
import { parse as parseVega, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

const MiB = 1024 * 1024;
const FONT = 'DejaVu Sans';
/** Pixels per SVG unit in the PNG. */
const ZOOM = 2;
const PANEL = { width: 380, height: 280 };
/** SVG units of white around the drawing. */
const MARGIN = 16;

// ---------------------------------------------------------------------------------------------
// Reports

/** The parts of a bench:scale report (scale.ts, `Report`) that the figure uses. */
interface ScaleReport {
  machine: {
    cpus: number;
    model: string;
    memoryBytes: number;
    node: string;
    commit: string;
    /** Files under src/ changed since the commit when the run ended. */
    uncommittedFiles?: number;
  };
  options: { domains: number };
  ramp: {
    ready: number;
    timedOut: boolean;
    durationSeconds: number;
    peakRssBytes?: number;
    timeTo?: Record<string, { p50: number; p99: number } | undefined>;
  };
  steady?: { meanRssBytes?: number };
}

interface Loaded {
  file: string;
  report: ScaleReport;
}

function progress(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

async function loadReport(file: string): Promise<Loaded> {
  const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
  const ok =
    isObject(parsed) &&
    isObject(parsed['machine']) &&
    isObject(parsed['options']) &&
    typeof parsed['options']['domains'] === 'number' &&
    isObject(parsed['ramp']) &&
    typeof parsed['ramp']['durationSeconds'] === 'number';
  if (!ok) throw new Error(`${file} is not a bench:scale --json report (no options.domains or ramp)`);
  return { file, report: parsed as unknown as ScaleReport };
}

// ---------------------------------------------------------------------------------------------
// Data

const MEMORY = ['peak during the ramp', 'mean at steady state'] as const;
const TIME = ['all Ready (first create → last Ready)', 'p99 per domain', 'p50 per domain'] as const;

interface Point {
  n: number;
  series: string;
  value: number;
}

function defined(n: number, series: string, value: number | undefined): Point[] {
  return value === undefined || !Number.isFinite(value) ? [] : [{ n, series, value }];
}

function memoryPoints({ report: r }: Loaded): Point[] {
  const n = r.options.domains;
  const steady = r.steady?.meanRssBytes;
  return [
    ...defined(n, MEMORY[0], r.ramp.peakRssBytes === undefined ? undefined : r.ramp.peakRssBytes / MiB),
    ...defined(n, MEMORY[1], steady === undefined ? undefined : steady / MiB),
  ];
}

function timePoints({ report: r }: Loaded): Point[] {
  const n = r.options.domains;
  const ready = r.ramp.timeTo?.['Ready'];
  return [
    // A run that timed out has no "all Ready" time: its duration is the timeout.
    ...defined(n, TIME[0], r.ramp.timedOut ? undefined : r.ramp.durationSeconds),
    ...defined(n, TIME[1], ready?.p99),
    ...defined(n, TIME[2], ready?.p50),
  ];
}

// ---------------------------------------------------------------------------------------------
// Caption

function machineText(m: ScaleReport['machine']): string {
  const gib = (m.memoryBytes / 1024 / MiB).toFixed(0);
  return `${m.cpus} CPUs (${m.model}), ${gib} GiB memory, Node ${m.node}`;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}

/** The caption lines: machine(s), commit(s), and runs that did not get every domain Ready. */
function captionLines(loaded: readonly Loaded[]): string[] {
  const machines = unique(loaded.map((l) => machineText(l.report.machine)));
  const commits = unique(
    loaded.map(({ report: { machine: m } }) => {
      const changed = m.uncommittedFiles ?? 0;
      return `${m.commit.slice(0, 7)}${changed > 0 ? ` (+${changed} uncommitted in src/)` : ''}`;
    }),
  );
  const runs = loaded.length === 1 ? '1 run' : `${loaded.length} runs`;
  const ns = loaded.map((l) => l.report.options.domains);
  const lines = [
    `${machines.length === 1 ? 'Machine' : 'Machines'}: ${machines.join('; ')}`,
    `bench:scale, ${runs} of ${commits.length === 1 ? 'commit' : 'commits'} ${commits.join(', ')}`,
  ];
  if (new Set(ns).size < ns.length)
    lines.push('Several runs of one N: a point each, the line and the value at their median');
  const timedOut = loaded.filter((l) => l.report.ramp.timedOut);
  if (timedOut.length > 0) {
    const which = timedOut.map(
      ({ report: r }) => `N = ${r.options.domains.toLocaleString('en-US')} (${r.ramp.ready} Ready)`,
    );
    lines.push(`Timed out, no "all Ready" time: ${which.join(', ')}`);
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Chart

/** Where each series writes its values beside its points, so that close values do not collide. */
interface LabelPlace {
  align: 'left' | 'right';
  dx: number;
  dy: number;
}

const RIGHT_ABOVE: LabelPlace = { align: 'left', dx: 8, dy: -8 };
const RIGHT_BELOW: LabelPlace = { align: 'left', dx: 8, dy: 12 };
const LEFT_ABOVE: LabelPlace = { align: 'right', dx: -8, dy: -8 };
const LEFT: LabelPlace = { align: 'right', dx: -9, dy: 4 };

/** One panel: a line through the median of each N and series, a point for every run, the medians. */
function panel(
  title: string,
  points: readonly Point[],
  ns: readonly number[],
  series: readonly (readonly [string, LabelPlace])[],
  y: { title: string; log: boolean },
): Record<string, unknown> {
  const names = series.map(([name]) => name);
  const x = {
    field: 'n',
    type: 'quantitative',
    title: 'CustomDomains (N, log scale)',
    scale: { type: 'log', domain: [Math.min(...ns) / 1.8, Math.max(...ns) * 1.8], nice: false },
    axis: { values: ns, format: ',d', grid: true },
  };
  const value = { field: 'value', type: 'quantitative', title: y.title };
  const median = { ...value, aggregate: 'median' };
  const legend = { orient: 'bottom', direction: 'vertical', labelLimit: 400 };
  const bySeries = { field: 'series', type: 'nominal', title: null, sort: names, legend };
  // Each label twice: a white outline under it keeps it legible where it crosses a line.
  const labels = series.flatMap(([name, place]) =>
    [{ stroke: 'white', strokeWidth: 3 }, {}].map((halo) => ({
      transform: [{ filter: { field: 'series', equal: name } }],
      mark: { type: 'text', fontSize: 11, ...place, ...halo },
      encoding: { y: median, text: { ...median, format: ',.0f' } },
    })),
  );
  // Room above the highest point for its value, and no tick at the very top: text that reaches
  // above the plot would push that panel's title up, out of line with the other's.
  const values = points.map((p) => p.value);
  const yScale = y.log
    ? { type: 'log', domain: [Math.min(...values) / 1.6, Math.max(...values) * 1.6], nice: false }
    : { domain: [0, Math.max(...values) * 1.12], nice: false };
  return {
    title: { text: title, anchor: 'start' },
    width: PANEL.width,
    height: PANEL.height,
    data: { values: points },
    encoding: {
      x,
      color: { ...bySeries, scale: { domain: names, scheme: 'tableau10' } },
    },
    layer: [
      {
        mark: { type: 'line', strokeWidth: 2 },
        encoding: {
          y: { ...median, scale: yScale },
        },
      },
      {
        mark: { type: 'point', filled: true, size: 60, opacity: 1 },
        encoding: { y: value, shape: { ...bySeries, scale: { domain: names } } },
      },
      ...labels,
    ],
  };
}

function figureSpec(loaded: readonly Loaded[]): TopLevelSpec {
  const ns = [...new Set(loaded.map((l) => l.report.options.domains))].sort((a, b) => a - b);
  const caption = captionLines(loaded);
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    // No background rectangle: the PNG is cropped to what is drawn, on white (renderPng).
    background: null,
    padding: 0,
    title: {
      text: 'Portico operator under N CustomDomains applied at once',
      anchor: 'start',
      fontSize: 16,
      subtitle: caption,
      subtitleFontSize: 11,
      subtitleColor: '#444',
      subtitlePadding: 6,
      offset: 14,
    },
    hconcat: [
      panel(
        'Operator memory (RSS)',
        loaded.flatMap(memoryPoints),
        ns,
        [
          [MEMORY[0], LEFT],
          [MEMORY[1], RIGHT_ABOVE],
        ],
        { title: 'RSS (MiB)', log: false },
      ),
      panel(
        'Time to Ready',
        loaded.flatMap(timePoints),
        ns,
        [
          [TIME[0], LEFT_ABOVE],
          [TIME[1], RIGHT_BELOW],
          [TIME[2], RIGHT_BELOW],
        ],
        { title: 'seconds (log scale)', log: true },
      ),
    ],
    spacing: 40,
    resolve: { scale: { color: 'independent', shape: 'independent' } },
    config: {
      font: FONT,
      view: { stroke: '#ccc' },
      axis: { labelFontSize: 11, titleFontSize: 12, gridColor: '#e6e6e6' },
      legend: { labelFontSize: 11, symbolStrokeWidth: 2 },
      title: { fontSize: 14 },
    },
  };
  return spec as unknown as TopLevelSpec;
}

/**
 * Vega lays text out with estimated widths (it measures text with a canvas, which Node does not
 * have), so the SVG can be wider than what it draws: the PNG is cropped to the drawn bounding box
 * plus MARGIN.
 */
async function renderPng(spec: TopLevelSpec): Promise<Buffer> {
  const view = new View(parseVega(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  const resvg = new Resvg(svg, {
    fitTo: { mode: 'zoom', value: ZOOM },
    background: 'white',
    font: { loadSystemFonts: true, defaultFontFamily: FONT, sansSerifFamily: FONT },
  });
  // cropByBBox takes only the native BBox object, so the one getBBox gave is widened in place.
  const box = resvg.getBBox();
  if (box !== undefined) {
    box.x -= MARGIN;
    box.y -= MARGIN;
    box.width += 2 * MARGIN;
    box.height += 2 * MARGIN;
    resvg.cropByBBox(box);
  }
  return resvg.render().asPng();
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { out: { type: 'string', default: 'docs/performance-scale.png' } },
  });
  if (positionals.length === 0)
    throw new Error('usage: plot-scale.ts REPORT.json... [--out docs/performance-scale.png]');
  const loaded = await Promise.all(positionals.map((f) => loadReport(resolve(f))));
  loaded.sort((a, b) => a.report.options.domains - b.report.options.domains);
  for (const { file, report: r } of loaded) {
    const ready = r.ramp.timeTo?.['Ready'];
    const mib = (b: number | undefined): string => (b === undefined ? 'n/a' : (b / MiB).toFixed(0));
    progress(
      `${file}: N ${r.options.domains}, peak RSS ${mib(r.ramp.peakRssBytes)} MiB, steady ${mib(r.steady?.meanRssBytes)} MiB, ` +
        `all Ready ${r.ramp.timedOut ? 'timed out' : `${r.ramp.durationSeconds.toFixed(1)} s`}, ` +
        `p50 ${ready?.p50.toFixed(1) ?? 'n/a'} s, p99 ${ready?.p99.toFixed(1) ?? 'n/a'} s`,
    );
  }
  const out = resolve(values.out);
  await writeFile(out, await renderPng(figureSpec(loaded)));
  progress(`wrote ${out}`);
}

await main();
