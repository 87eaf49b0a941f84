/**
 * Summarizes a V8 CPU profile (`node --cpu-prof`, a `.cpuprofile` file): self time by package
 * (node_modules/<package>, `node:` internals, the project's own files, GC and idle) and the top
 * functions by self time. Prints milliseconds and shares of the non-idle time.
 *
 *   npx tsx test/bench/cpu-profile-summary.ts PROFILE.cpuprofile [--top 25]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
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

function selfTimes(profile: Profile): Map<number, number> {
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return self;
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
    options: { top: { type: 'string', default: '25' } },
  });
  const file = positionals[0];
  if (!file) throw new Error('usage: cpu-profile-summary.ts PROFILE.cpuprofile [--top N]');
  const top = Number(values.top);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busy = 0;
  for (const [id, us] of selfTimes(profile)) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const pkg = packageOf(url, functionName);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + us);
    if (functionName === '(idle)') continue;
    busy += us;
    const where =
      url === ''
        ? ''
        : ` ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|src)\//, '$1/')}:${String(lineNumber + 1)}`;
    const name = `${functionName || '(anonymous)'}${where}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
  }
  const idle = byPackage.get('(idle)') ?? 0;
  byPackage.delete('(idle)');
  process.stdout.write(`busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms\n`);
  const sorted = (m: Map<string, number>): [string, number][] => [...m].sort((a, b) => b[1] - a[1]);
  printTable('self time by package', sorted(byPackage), busy, top);
  printTable('self time by function', sorted(byFunction), busy, top);
}

main();
