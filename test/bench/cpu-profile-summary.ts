/**
 * Summarizes a V8 CPU profile (`node --cpu-prof`, a `.cpuprofile` file; the sandbox's operator
 * writes one with `PORTICO_SANDBOX_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR"`): self time by package
 * (node_modules/<package>, `node:` internals, the project's own files, GC and idle), the top
 * functions by self time, and the top functions by total time (self plus callees; a sample counts
 * once per function however deep the recursion). Prints milliseconds and shares of the non-idle
 * time.
 *
 *   npx tsx test/bench/cpu-profile-summary.ts PROFILE.cpuprofile [--top 25] [--from S] [--to S]
 *
 * `--from`/`--to` keep the samples between those seconds after the profile's start (e.g. a
 * restart's resync only).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The package a script URL belongs to. */
function packageOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node: internals';
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (match?.[1]) return match[1];
  if (url.includes('/dist/') || url.includes('/src/')) return 'portico';
  return url;
}

/** Microseconds per sampled node, of the samples between `fromUs` and `toUs` after the start. */
function selfTimes(profile: Profile, fromUs: number, toUs: number): Map<number, number> {
  const self = new Map<number, number>();
  let at = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (at >= fromUs && at <= toUs) self.set(id, (self.get(id) ?? 0) + us);
  });
  return self;
}

/** `name file:line`, the file shortened to what follows node_modules/, dist/ or src/. */
function functionLabel(frame: ProfileNode['callFrame']): string {
  const { functionName, url, lineNumber } = frame;
  const where =
    url === ''
      ? ''
      : ` ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|src)\//, '$1/')}:${String(lineNumber + 1)}`;
  return `${functionName || '(anonymous)'}${where}`;
}

/** Busy microseconds under each function: its samples and its callees', once per stack. */
function totalTimes(profile: Profile, self: Map<number, number>): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const total = new Map<string, number>();
  for (const [id, us] of self) {
    if (byId.get(id)?.callFrame.functionName === '(idle)') continue;
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const node = byId.get(at);
      if (!node || node.callFrame.functionName === '(root)') continue;
      const label = functionLabel(node.callFrame);
      if (seen.has(label)) continue;
      seen.add(label);
      total.set(label, (total.get(label) ?? 0) + us);
    }
  }
  return total;
}

function printTable(title: string, rows: [string, number][], total: number, top: number): void {
  process.stdout.write(`\n${title}\n`);
  for (const [name, us] of rows.slice(0, top)) {
    const share = ((100 * us) / total).toFixed(1).padStart(5);
    process.stdout.write(`${(us / 1000).toFixed(0).padStart(9)} ms  ${share} %  ${name}\n`);
  }
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: 'string', default: '25' },
      from: { type: 'string' },
      to: { type: 'string' },
    },
  });
  const file = positionals[0];
  if (!file)
    throw new Error('usage: cpu-profile-summary.ts PROFILE.cpuprofile [--top N] [--from S] [--to S]');
  const top = Number(values.top);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busy = 0;
  const fromUs = values.from === undefined ? -Infinity : Number(values.from) * 1e6;
  const toUs = values.to === undefined ? Infinity : Number(values.to) * 1e6;
  const self = selfTimes(profile, fromUs, toUs);
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url } = node.callFrame;
    const pkg = packageOf(url, functionName);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + us);
    if (functionName === '(idle)') continue;
    busy += us;
    const name = functionLabel(node.callFrame);
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
  }
  const idle = byPackage.get('(idle)') ?? 0;
  byPackage.delete('(idle)');
  process.stdout.write(`busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms\n`);
  const sorted = (m: Map<string, number>): [string, number][] => [...m].sort((a, b) => b[1] - a[1]);
  printTable('self time by package', sorted(byPackage), busy, top);
  printTable('self time by function', sorted(byFunction), busy, top);
  printTable('total time by function (self and callees)', sorted(totalTimes(profile, self)), busy, top);
}

main();
