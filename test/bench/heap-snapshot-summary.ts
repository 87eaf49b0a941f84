/**
 * Summarizes a V8 heap snapshot (`.heapsnapshot`, e.g. written by `node --heapsnapshot-signal=SIGUSR2`
 * or `v8.writeHeapSnapshot()`): the live objects' self size and count, grouped by node type and
 * constructor name (strings grouped by type). Writing a snapshot runs a full GC first, so what it
 * holds is live, not garbage. Prints MiB, counts, and the total.
 *
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot [--top 30]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

const MiB = 1024 * 1024;

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '30' } },
  });
  const file = positionals[0];
  if (!file) throw new Error('usage: heap-snapshot-summary.ts FILE.heapsnapshot [--top N]');
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
  process.stdout.write(
    `live self size ${(total / MiB).toFixed(1)} MiB in ${String(snap.nodes.length / width)} nodes\n`,
  );
  const rows = [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, Number(values.top));
  for (const [key, { bytes, count }] of rows) {
    process.stdout.write(
      `${(bytes / MiB).toFixed(2).padStart(9)} MiB ${String(count).padStart(9)}  ${key}\n`,
    );
  }
}

main();
