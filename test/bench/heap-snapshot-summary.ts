/**
 * Summarizes a V8 heap snapshot (`.heapsnapshot`, e.g. written by `node --heapsnapshot-signal=SIGUSR2`
 * or `v8.writeHeapSnapshot()`): the live objects' self size and count, grouped by node type and
 * constructor name (strings grouped by type). Writing a snapshot runs a full GC first, so what it
 * holds is live, not garbage. Prints MiB, counts, and the total.
 *
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot [--top 30]
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot --base BEFORE.heapsnapshot [--per 1000]
 *
 * With `--base`, the groups are ordered by what FILE holds more than BEFORE (e.g. a snapshot taken
 * before N domains were created), and `--per N` also prints that growth in bytes per N (per domain).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

const MiB = 1024 * 1024;

interface Summary {
  groups: Map<string, { bytes: number; count: number }>;
  total: number;
  nodes: number;
}

function summarize(file: string): Summary {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const groups = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt] ?? 0] ?? '?';
    const size = snap.nodes[i + sizeAt] ?? 0;
    const name = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '';
    const key = type === 'object' || type === 'closure' ? `${type} ${name}` : type;
    const group = groups.get(key) ?? { bytes: 0, count: 0 };
    group.bytes += size;
    group.count += 1;
    groups.set(key, group);
    total += size;
  }
  return { groups, total, nodes: snap.nodes.length / width };
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '30' }, base: { type: 'string' }, per: { type: 'string' } },
  });
  const file = positionals[0];
  if (!file)
    throw new Error('usage: heap-snapshot-summary.ts FILE.heapsnapshot [--top N] [--base FILE] [--per N]');
  const { groups, total, nodes } = summarize(file);
  if (values.base !== undefined) {
    printGrowth(groups, total, summarize(values.base), Number(values.top), Number(values.per ?? 0));
    return;
  }
  process.stdout.write(`live self size ${(total / MiB).toFixed(1)} MiB in ${String(nodes)} nodes\n`);
  const rows = [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, Number(values.top));
  for (const [key, { bytes, count }] of rows) {
    process.stdout.write(
      `${(bytes / MiB).toFixed(2).padStart(9)} MiB ${String(count).padStart(9)}  ${key}\n`,
    );
  }
}

/** The groups ordered by growth over `base`; with `per` > 0, the growth per `per` units too. */
function printGrowth(
  groups: Summary['groups'],
  total: number,
  base: Summary,
  top: number,
  per: number,
): void {
  const perUnit = (bytes: number): string =>
    per > 0 ? `${(bytes / per).toFixed(0).padStart(8)} B/unit` : '';
  process.stdout.write(
    `live self size ${(base.total / MiB).toFixed(1)} -> ${(total / MiB).toFixed(1)} MiB ${perUnit(total - base.total)}\n`,
  );
  const rows = [...groups]
    .map(([key, g]) => {
      const b = base.groups.get(key) ?? { bytes: 0, count: 0 };
      return { key, bytes: g.bytes - b.bytes, count: g.count - b.count };
    })
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, top);
  for (const { key, bytes, count } of rows) {
    process.stdout.write(
      `${(bytes / MiB).toFixed(2).padStart(9)} MiB ${String(count).padStart(9)} ${perUnit(bytes)}  ${key}\n`,
    );
  }
}

main();
