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
 *
 *   npx tsx test/bench/heap-snapshot-summary.ts FILE.heapsnapshot --retained [--top 40] [--per N]
 *
 * With `--retained`, the objects that retain the most: each object's retained size (its own and
 * that of every object reachable only through it: the dominator tree, Cooper, Harvey and Kennedy's
 * iterative algorithm, weak edges ignored, as DevTools computes it), the largest first, each named
 * by its constructor and the property that holds it (`Map <- ListWatch.objects`) and by the object
 * that dominates it. Nested holders all appear (a cache's Map and the ListWatch that holds it).
 * `--under TEXT` breaks down what the largest object whose label contains TEXT retains (e.g.
 * `--under ingresses`: one informer cache), grouped as with `--by-retainer`.
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
 * Calls `visit` for every edge of the snapshot, in order: the holder's name, the edge's type, its
 * name (a property name, or '' for an element or a hidden edge) and its target's node index.
 */
function forEachEdge(
  snap: Snapshot,
  width: number,
  visit: (holder: string, type: string, name: string, target: number) => void,
): void {
  const meta = snap.snapshot.meta;
  const edgeWidth = meta.edge_fields.length;
  const edgeTypeAt = meta.edge_fields.indexOf('type');
  const edgeNameAt = meta.edge_fields.indexOf('name_or_index');
  const toAt = meta.edge_fields.indexOf('to_node');
  const edgeTypes = meta.edge_types[0];
  const nameAt = meta.node_fields.indexOf('name');
  const edgeCountAt = meta.node_fields.indexOf('edge_count');
  let edge = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const holder = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '';
    const count = snap.nodes[i + edgeCountAt] ?? 0;
    for (let e = 0; e < count; e += 1, edge += edgeWidth) {
      const type = edgeTypes[snap.edges[edge + edgeTypeAt] ?? 0] ?? '';
      const named = type !== 'element' && type !== 'hidden';
      const name = named ? (snap.strings[snap.edges[edge + edgeNameAt] ?? 0] ?? '') : '';
      visit(holder, type, name, (snap.edges[edge + toAt] ?? 0) / width);
    }
  }
}

/**
 * For each node (by its index in `nodes` / node width), the holder and property of the first
 * property or element edge that points to it: `Object.message`, `Array[]`; '' where none does.
 * With `anyEdge`, where none does, the first context, internal or hidden edge to it:
 * `(context of open)`, `(internal of Map.table)`: a closure's variables, a Map's table.
 */
function retainers(snap: Snapshot, width: number, anyEdge = false): string[] {
  const held: string[] = new Array<string>(snap.nodes.length / width).fill('');
  forEachEdge(snap, width, (holder, type, name, target) => {
    if ((type !== 'property' && type !== 'element') || held[target] !== '') return;
    held[target] = type === 'property' ? `${holder}.${name}` : `${holder}[]`;
  });
  if (!anyEdge) return held;
  forEachEdge(snap, width, (holder, type, name, target) => {
    if ((type !== 'context' && type !== 'internal' && type !== 'hidden') || held[target] !== '') return;
    held[target] = `(${type} of ${holder}${name === '' ? '' : `.${name}`})`;
  });
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

/**
 * The objects with the largest retained size (bytes) in `file`, with their label and their immediate
 * dominator's label, largest first; only objects (not strings, code or arrays' internals).
 */
function retainedSizes(
  file: string,
  top: number,
  under?: string,
): { label: string; dominator: string; bytes: number }[] {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const meta = snap.snapshot.meta;
  const width = meta.node_fields.length;
  const edgeWidth = meta.edge_fields.length;
  const typeAt = meta.node_fields.indexOf('type');
  const nameAt = meta.node_fields.indexOf('name');
  const sizeAt = meta.node_fields.indexOf('self_size');
  const edgeCountAt = meta.node_fields.indexOf('edge_count');
  const edgeTypeAt = meta.edge_fields.indexOf('type');
  const toAt = meta.edge_fields.indexOf('to_node');
  const edgeTypes = meta.edge_types[0];
  const weak = edgeTypes.indexOf('weak');
  const shortcut = edgeTypes.indexOf('shortcut');
  const count = snap.nodes.length / width;
  const firstEdge = new Uint32Array(count + 1);
  for (let n = 0; n < count; n++)
    firstEdge[n + 1] = (firstEdge[n] ?? 0) + (snap.nodes[n * width + edgeCountAt] ?? 0);
  const followed = (e: number): boolean => {
    const type = snap.edges[e * edgeWidth + edgeTypeAt];
    return type !== weak && type !== shortcut;
  };
  const target = (e: number): number => (snap.edges[e * edgeWidth + toAt] ?? 0) / width;

  // Postorder from the synthetic root (node 0), iteratively.
  const order = new Int32Array(count).fill(-1); // postorder number
  const byOrder: number[] = [];
  const visited = new Uint8Array(count);
  const stack: number[] = [0];
  const cursor = new Uint32Array(count);
  visited[0] = 1;
  cursor[0] = firstEdge[0] ?? 0;
  while (stack.length > 0) {
    const n = stack[stack.length - 1] ?? 0;
    const end = firstEdge[n + 1] ?? 0;
    let pushed = false;
    while ((cursor[n] ?? 0) < end) {
      const e = cursor[n] ?? 0;
      cursor[n] = e + 1;
      if (!followed(e)) continue;
      const t = target(e);
      if (visited[t]) continue;
      visited[t] = 1;
      cursor[t] = firstEdge[t] ?? 0;
      stack.push(t);
      pushed = true;
      break;
    }
    if (!pushed) {
      stack.pop();
      order[n] = byOrder.length;
      byOrder.push(n);
    }
  }
  // Predecessors of reachable nodes, by postorder number.
  const reach = byOrder.length;
  const predCount = new Uint32Array(reach + 1);
  for (let n = 0; n < count; n++) {
    if (!visited[n]) continue;
    for (let e = firstEdge[n] ?? 0; e < (firstEdge[n + 1] ?? 0); e++) {
      if (followed(e))
        predCount[(order[target(e)] ?? 0) + 1] = (predCount[(order[target(e)] ?? 0) + 1] ?? 0) + 1;
    }
  }
  for (let i = 0; i < reach; i++) predCount[i + 1] = (predCount[i + 1] ?? 0) + (predCount[i] ?? 0);
  const preds = new Uint32Array(predCount[reach] ?? 0);
  const fill = predCount.slice(0, reach);
  for (let n = 0; n < count; n++) {
    if (!visited[n]) continue;
    for (let e = firstEdge[n] ?? 0; e < (firstEdge[n + 1] ?? 0); e++) {
      if (!followed(e)) continue;
      const to = order[target(e)] ?? 0;
      preds[fill[to] ?? 0] = order[n] ?? 0;
      fill[to] = (fill[to] ?? 0) + 1;
    }
  }
  // Immediate dominators by postorder number (the root is reach - 1).
  const root = reach - 1;
  const idom = new Int32Array(reach).fill(-1);
  idom[root] = root;
  /** The nearest common dominator of `a` and `c` (postorder numbers), as far as known. */
  const intersect = (a0: number, c0: number): number => {
    let a = a0;
    let c = c0;
    while (a !== c) {
      while (a < c) a = idom[a] ?? root;
      while (c < a) c = idom[c] ?? root;
    }
    return a;
  };
  /** The common dominator of `b`'s predecessors processed so far; -1 when none is. */
  const fromPredecessors = (b: number): number => {
    let next = -1;
    for (let p = predCount[b] ?? 0; p < (predCount[b + 1] ?? 0); p++) {
      const a = preds[p] ?? 0;
      if (idom[a] !== -1) next = next === -1 ? a : intersect(a, next);
    }
    return next;
  };
  let changed = true;
  while (changed) {
    changed = false;
    for (let b = root - 1; b >= 0; b--) {
      const next = fromPredecessors(b);
      changed ||= next !== -1 && idom[b] !== next;
      if (next !== -1) idom[b] = next;
    }
  }
  // Retained sizes, children before their dominators (postorder numbers ascend up the tree).
  const retained = new Float64Array(reach);
  for (let b = 0; b < reach; b++) retained[b] = snap.nodes[(byOrder[b] ?? 0) * width + sizeAt] ?? 0;
  for (let b = 0; b < root; b++) {
    const d = idom[b] ?? root;
    if (d !== b) retained[d] = (retained[d] ?? 0) + (retained[b] ?? 0);
  }
  const held = retainers(snap, width, true);
  const objectType = meta.node_types[0].indexOf('object');
  const edgeNameAt = meta.edge_fields.indexOf('name_or_index');
  const property = edgeTypes.indexOf('property');
  /** The string a `path` property of node `n` holds (a ListWatch's API path), or ''. */
  const pathOf = (n: number): string => {
    for (let e = firstEdge[n] ?? 0; e < (firstEdge[n + 1] ?? 0); e++) {
      const at = e * edgeWidth;
      if (snap.edges[at + edgeTypeAt] !== property) continue;
      if (snap.strings[snap.edges[at + edgeNameAt] ?? 0] !== 'path') continue;
      return ` [${snap.strings[snap.nodes[target(e) * width + nameAt] ?? 0] ?? ''}]`;
    }
    return '';
  };
  const label = (b: number): string => {
    const n = byOrder[b] ?? 0;
    const name = snap.strings[snap.nodes[n * width + nameAt] ?? 0] ?? '';
    return `${name}${pathOf(n)} <- ${held[n] || '?'}`;
  };
  /** The label of the nearest dominator of `b` held by a property or element (a named holder). */
  const within = (b: number): string => {
    let d = idom[b] ?? root;
    while (d !== root && !held[byOrder[d] ?? 0]) d = idom[d] ?? root;
    return d === root ? '(root)' : label(d);
  };
  const rows: { b: number; bytes: number }[] = [];
  for (let b = 0; b < root; b++) {
    if (snap.nodes[(byOrder[b] ?? 0) * width + typeAt] !== objectType) continue;
    rows.push({ b, bytes: retained[b] ?? 0 });
  }
  rows.sort((x, y) => y.bytes - x.bytes);
  if (under === undefined)
    return rows.slice(0, top).map(({ b, bytes }) => ({ label: label(b), dominator: within(b), bytes }));

  // What the largest object labelled with `under` retains, grouped as --by-retainer groups.
  const head = rows.find(({ b }) => label(b).includes(under))?.b;
  if (head === undefined) throw new Error(`no object labelled with ${JSON.stringify(under)}`);
  const types = meta.node_types[0];
  const inside = new Int8Array(reach); // 0 unknown, 1 inside, -1 outside
  inside[head] = 1;
  inside[root] = -1;
  const isInside = (b: number): boolean => {
    const path: number[] = [];
    let d = b;
    while (inside[d] === 0) {
      path.push(d);
      d = idom[d] ?? root;
    }
    const verdict = inside[d] ?? -1;
    for (const p of path) inside[p] = verdict;
    return verdict === 1;
  };
  const groups = new Map<string, { bytes: number; count: number }>();
  for (let b = 0; b < root; b++) {
    if (!isInside(b)) continue;
    const n = byOrder[b] ?? 0;
    const type = types[snap.nodes[n * width + typeAt] ?? 0] ?? '?';
    const name = snap.strings[snap.nodes[n * width + nameAt] ?? 0] ?? '';
    const key = `${type === 'object' || type === 'closure' ? `${type} ${name}` : type} <- ${held[n] || '?'}`;
    const group = groups.get(key) ?? { bytes: 0, count: 0 };
    group.bytes += snap.nodes[n * width + sizeAt] ?? 0;
    group.count += 1;
    groups.set(key, group);
  }
  process.stdout.write(`${label(head)}: ${((retained[head] ?? 0) / MiB).toFixed(2)} MiB retained\n`);
  return [...groups]
    .sort((x, y) => y[1].bytes - x[1].bytes)
    .slice(0, top)
    .map(([key, g]) => ({ label: key, dominator: `${g.count} objects`, bytes: g.bytes }));
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: 'string', default: '30' },
      base: { type: 'string' },
      per: { type: 'string' },
      'by-retainer': { type: 'boolean', default: false },
      retained: { type: 'boolean', default: false },
      under: { type: 'string' },
    },
  });
  const file = positionals[0];
  if (!file)
    throw new Error(
      'usage: heap-snapshot-summary.ts FILE.heapsnapshot [--top N] [--base FILE] [--per N] [--by-retainer | --retained [--under TEXT]]',
    );
  if (values.retained) {
    const per = Number(values.per ?? 0);
    for (const { label, dominator, bytes } of retainedSizes(file, Number(values.top), values.under)) {
      const perUnit = per > 0 ? `${(bytes / per).toFixed(0).padStart(8)} B/unit` : '';
      process.stdout.write(
        `${(bytes / MiB).toFixed(2).padStart(9)} MiB ${perUnit}  ${label}   (in ${dominator})\n`,
      );
    }
    return;
  }
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
