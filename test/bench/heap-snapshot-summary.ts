/**
 * Summarizes a V8 heap snapshot (`.heapsnapshot`, e.g. written by `node --heapsnapshot-signal=SIGUSR2`
 * or `v8.writeHeapSnapshot()`): the live objects' self size and count, grouped by node type and
 * constructor name (strings grouped by type). Writing a snapshot runs a full GC first, so what it
 * holds is live, not garbage. Prints MiB, counts, and the total.
 *
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot [--top 30]
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot --base BEFORE.heapsnapshot [--per 1000]
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot --by-retainer [--base ...]
 *
 * With `--by-retainer`, each object is grouped also by the property that holds it and the holder's
 * constructor (`string <- Object.message`, `object Object <- Array[]`): the first property or
 * element edge found that points to it (an object held from several places counts once). That
 * names the fields a cache's bytes go to.
 *
 * With `--base`, the groups are ordered by what FILE holds more than BEFORE (e.g. a snapshot taken
 * before N domains were created), and `--per N` also prints that growth in bytes per N (per domain).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

const MiB = 1024 * 1024;

interface Summary {
  groups: Map<string, { bytes: number; count: number }>;
  total: number;
  nodes: number;
}

/**
 * For each node (by its index in `nodes` / node width), the holder and property of the first
 * property or element edge that points to it: `Object.message`, `Array[]`; '' where none does.
 */
function retainers(snap: Snapshot, width: number): string[] {
  const meta = snap.snapshot.meta;
  const edgeWidth = meta.edge_fields.length;
  const edgeTypeAt = meta.edge_fields.indexOf('type');
  const edgeNameAt = meta.edge_fields.indexOf('name_or_index');
  const toAt = meta.edge_fields.indexOf('to_node');
  const edgeTypes = meta.edge_types[0];
  const nameAt = meta.node_fields.indexOf('name');
  const edgeCountAt = meta.node_fields.indexOf('edge_count');
  const held: string[] = new Array<string>(snap.nodes.length / width).fill('');
  let edge = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const holder = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '';
    const count = snap.nodes[i + edgeCountAt] ?? 0;
    for (let e = 0; e < count; e += 1, edge += edgeWidth) {
      const type = edgeTypes[snap.edges[edge + edgeTypeAt] ?? 0];
      if (type !== 'property' && type !== 'element') continue;
      const target = (snap.edges[edge + toAt] ?? 0) / width;
      if (held[target] !== '') continue;
      held[target] =
        type === 'property'
          ? `${holder}.${snap.strings[snap.edges[edge + edgeNameAt] ?? 0] ?? ''}`
          : `${holder}[]`;
    }
  }
  return held;
}

function summarize(file: string, byRetainer = false): Summary {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const held = byRetainer ? retainers(snap, width) : undefined;
  const groups = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt] ?? 0] ?? '?';
    const size = snap.nodes[i + sizeAt] ?? 0;
    const name = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '';
    const kind = type === 'object' || type === 'closure' ? `${type} ${name}` : type;
    const key = held ? `${kind} <- ${held[i / width] || '?'}` : kind;
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
    options: {
      top: { type: 'string', default: '30' },
      base: { type: 'string' },
      per: { type: 'string' },
      'by-retainer': { type: 'boolean', default: false },
    },
  });
  const file = positionals[0];
  if (!file)
    throw new Error(
      'usage: heap-snapshot-summary.ts FILE.heapsnapshot [--top N] [--base FILE] [--per N] [--by-retainer]',
    );
  const byRetainer = values['by-retainer'];
  const { groups, total, nodes } = summarize(file, byRetainer);
  if (values.base !== undefined) {
    const base = summarize(values.base, byRetainer);
    printGrowth(groups, total, base, Number(values.top), Number(values.per ?? 0));
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
