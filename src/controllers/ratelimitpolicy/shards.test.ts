import { describe, expect, it } from 'vitest';
import { CONFIG_SHARD_BUDGET_BYTES, renderConfigEntries } from '../../ratelimit/config-schema.js';
import { readShard } from './compile.js';
import { planShards, type CurrentShard, type ShardPlan } from './shards.js';

const NAME = 'portico-ratelimit-config';

/** A fake entry text of `bytes` bytes for `domain` (the planner only measures and copies it). */
function entry(domain: string, bytes: number, version = 1): string {
  const head = `{"domain":"${domain}","v":${version},"pad":"`;
  return `${head}${'x'.repeat(bytes - head.length - 2)}"}`;
}

function shard(name: string, entries: Record<string, string>): CurrentShard {
  const list = Object.entries(entries).map(([domain, text]) => ({ domain, text }));
  return { name, text: renderConfigEntries(list), entries: new Map(Object.entries(entries)) };
}

/** The shards after applying `plan` on top of `current`. */
function apply(current: readonly CurrentShard[], plan: ShardPlan): CurrentShard[] {
  const byName = new Map(current.map((s) => [s.name, s]));
  for (const w of plan.writes) {
    const domains = [...plan.placement].filter(([, s]) => s === w.name).map(([d]) => d);
    const before = byName.get(w.name);
    expect(before?.text).not.toBe(w.text);
    byName.set(w.name, { name: w.name, text: w.text, entries: new Map(domains.map((d) => [d, ''])) });
  }
  return [...byName.values()];
}

const KB = 1024;

/** Every policy a write removes and that goes to another shard being written is written there first. */
function expectDestinationsFirst(plan: ShardPlan): void {
  plan.writes.forEach((w, i) => {
    for (const d of w.removes) {
      const to = plan.placement.get(d);
      if (to === undefined || to === w.name) continue;
      expect(
        plan.writes.findIndex((x) => x.name === to),
        `${d} moves ${w.name} -> ${to}`,
      ).toBeLessThan(i);
    }
  });
}

describe('planShards', () => {
  it('writes shard 0 even with no policy', () => {
    const plan = planShards({
      configName: NAME,
      desired: new Map(),
      current: [],
      required: [],
      budgetBytes: 1000,
    });
    expect(plan.writes).toEqual([{ name: NAME, text: renderConfigEntries([]), removes: [] }]);
  });

  it('spreads policies over more than 1 MiB into shards that each stay under the budget', () => {
    const desired = new Map(Array.from({ length: 8 }, (_, i) => [`t/p${i}`, entry(`t/p${i}`, 330 * KB)]));
    const plan = planShards({
      configName: NAME,
      desired,
      current: [],
      required: [],
      budgetBytes: CONFIG_SHARD_BUDGET_BYTES,
    });
    expect(plan.writes.map((w) => w.name)).toEqual([NAME, `${NAME}-1`, `${NAME}-2`, `${NAME}-3`]);
    for (const w of plan.writes)
      expect(Buffer.byteLength(w.text)).toBeLessThanOrEqual(CONFIG_SHARD_BUDGET_BYTES);
    expect(plan.placement.size).toBe(8);
    // Every policy is in the shard the placement names, once.
    const all = plan.writes.map((w) => w.text).join('');
    for (const [domain, name] of plan.placement) {
      expect(plan.writes.find((w) => w.name === name)?.text).toContain(`"domain":"${domain}"`);
      expect(all.split(`"domain":"${domain}"`)).toHaveLength(2);
    }
  });

  it('writes only the shard of a changed policy, and nothing when nothing changed', () => {
    const a = { 't/a': entry('t/a', 300), 't/b': entry('t/b', 300) };
    const current = [shard(NAME, a), shard(`${NAME}-1`, { 't/c': entry('t/c', 300) })];
    const same = planShards({
      configName: NAME,
      desired: new Map(Object.entries({ ...a, 't/c': entry('t/c', 300) })),
      current,
      required: [],
      budgetBytes: 1000,
    });
    expect(same.writes).toEqual([]);
    const changed = planShards({
      configName: NAME,
      desired: new Map(Object.entries({ ...a, 't/c': entry('t/c', 300, 2) })),
      current,
      required: [],
      budgetBytes: 1000,
    });
    expect(changed.writes.map((w) => w.name)).toEqual([`${NAME}-1`]);
  });

  it('moves a policy that outgrew its shard, adding it to the new shard before removing it from the old', () => {
    const current = [shard(NAME, { 't/a': entry('t/a', 300), 't/b': entry('t/b', 300) })];
    const plan = planShards({
      configName: NAME,
      desired: new Map([
        ['t/a', entry('t/a', 300)],
        ['t/b', entry('t/b', 800, 2)],
      ]),
      current,
      required: [],
      budgetBytes: 1000,
    });
    // t/a, unchanged, keeps its place; t/b moves to a new shard, written first.
    expect(plan.placement).toEqual(
      new Map([
        ['t/a', NAME],
        ['t/b', `${NAME}-1`],
      ]),
    );
    expect(plan.writes.map((w) => [w.name, w.removes])).toEqual([
      [`${NAME}-1`, []],
      [NAME, ['t/b']],
    ]);
  });

  it('puts new policies in the first shard with room, and drops deleted ones', () => {
    const current = [
      shard(NAME, { 't/a': entry('t/a', 600) }),
      shard(`${NAME}-1`, { 't/b': entry('t/b', 300) }),
    ];
    const plan = planShards({
      configName: NAME,
      desired: new Map([
        ['t/a', entry('t/a', 600)],
        ['t/new', entry('t/new', 300)],
      ]),
      current,
      required: [],
      budgetBytes: 1000,
    });
    expect(plan.placement.get('t/new')).toBe(NAME);
    expect(plan.writes.map((w) => [w.name, w.removes])).toEqual([
      [NAME, []],
      [`${NAME}-1`, ['t/b']],
    ]);
  });

  it('re-creates a shard deleted by hand that a server still holds, with the policies that were in it', () => {
    const desired = new Map([
      ['t/a', entry('t/a', 600)],
      ['t/b', entry('t/b', 600)],
      ['t/c', entry('t/c', 600)],
    ]);
    const first = planShards({ configName: NAME, desired, current: [], required: [], budgetBytes: 1000 });
    const shards = apply([], first);
    expect(shards.map((s) => s.name)).toEqual([NAME, `${NAME}-1`, `${NAME}-2`]);
    // The last shard is deleted by hand: the server reports it retained.
    const left = shards.filter((s) => s.name !== `${NAME}-2`);
    const repair = planShards({
      configName: NAME,
      desired,
      current: left,
      required: [`${NAME}-2`],
      budgetBytes: 1000,
    });
    expect(repair.writes.map((w) => w.name)).toEqual([`${NAME}-2`]);
    expect(repair.placement.get('t/c')).toBe(`${NAME}-2`);
    // Without the report it would still be written (a new shard at the lowest free index).
    const blind = planShards({ configName: NAME, desired, current: left, required: [], budgetBytes: 1000 });
    expect(blind.writes.map((w) => w.name)).toEqual([`${NAME}-2`]);
  });

  it('keeps an empty shard a server reports as retained (it is written empty)', () => {
    const plan = planShards({
      configName: NAME,
      desired: new Map(),
      current: [shard(NAME, {})],
      required: [`${NAME}-4`, 'other-configmap'],
      budgetBytes: 1000,
    });
    expect(plan.writes).toEqual([{ name: `${NAME}-4`, text: renderConfigEntries([]), removes: [] }]);
  });

  it('takes over the single ConfigMap of an earlier version as shard 0, moving out what does not fit', () => {
    const old = JSON.stringify(
      {
        schemaVersion: 1,
        policies: [
          {
            domain: 't/a',
            uid: 'u',
            generation: 1,
            plans: [{ name: 'f', requestsPerMinute: 1, requestsPerDay: 1 }],
            defaultPlan: 'f',
            overrides: [],
          },
        ],
      },
      null,
      1,
    );
    const read = readShard(NAME, old);
    const text = read.shard.entries.get('t/a') ?? '';
    const plan = planShards({
      configName: NAME,
      desired: new Map([
        ['t/a', text],
        ['t/b', entry('t/b', 900)],
      ]),
      current: [read.shard],
      required: [],
      budgetBytes: 1000,
    });
    expect(plan.placement).toEqual(
      new Map([
        ['t/a', NAME],
        ['t/b', `${NAME}-1`],
      ]),
    );
    // Shard 0 is rewritten in the new layout (same entry), after the new shard.
    expect(plan.writes.map((w) => w.name)).toEqual([`${NAME}-1`, NAME]);
  });

  it('gives a policy found in two shards one place, and a policy larger than the budget a shard of its own', () => {
    const a = entry('t/a', 300);
    const plan = planShards({
      configName: NAME,
      desired: new Map([
        ['t/a', a],
        ['t/huge', entry('t/huge', 2000)],
      ]),
      current: [shard(NAME, { 't/a': a }), shard(`${NAME}-1`, { 't/a': a })],
      required: [],
      budgetBytes: 1000,
    });
    expect(plan.placement.get('t/a')).toBe(NAME);
    expect(plan.placement.get('t/huge')).toBe(`${NAME}-2`);
    expect(plan.writes.map((w) => [w.name, w.removes])).toEqual([
      [`${NAME}-2`, []],
      [`${NAME}-1`, ['t/a']],
    ]);
  });

  it('never moves a policy into a shard that moves one out, so every destination is written first', () => {
    const d = entry('t/d', 300);
    const current = [shard(NAME, { 't/d': d, 't/e': entry('t/e', 300) }), shard(`${NAME}-1`, { 't/d': d })];
    const plan = planShards({
      configName: NAME,
      desired: new Map([
        ['t/d', d],
        ['t/e', entry('t/e', 700, 2)],
      ]),
      current,
      required: [],
      budgetBytes: 1000,
    });
    // Shard 1 loses its copy of t/d to shard 0, so t/e (too big for shard 0 now) does not go there.
    expect(plan.placement).toEqual(
      new Map([
        ['t/d', NAME],
        ['t/e', `${NAME}-2`],
      ]),
    );
    expect(plan.writes.map((w) => w.name)).toEqual([`${NAME}-2`, NAME, `${NAME}-1`]);
    expectDestinationsFirst(plan);
  });

  it('writes destinations first when many policies change at once', () => {
    const sizes = [100, 250, 400, 120, 330, 90, 260, 410, 150, 300];
    const first = planShards({
      configName: NAME,
      desired: new Map(sizes.map((b, i) => [`t/p${i}`, entry(`t/p${i}`, b)])),
      current: [],
      required: [],
      budgetBytes: 1000,
    });
    const current = first.writes.map((w) => {
      const domains = [...first.placement].filter(([, n]) => n === w.name).map(([dd]) => dd);
      return shard(
        w.name,
        Object.fromEntries(domains.map((dd) => [dd, entry(dd, sizes[Number(dd.slice(3))] ?? 0)])),
      );
    });
    const grown = planShards({
      configName: NAME,
      desired: new Map(
        sizes.map((b, i) => [`t/p${i}`, entry(`t/p${i}`, i % 2 === 0 ? Math.min(b * 2, 900) : b, 2)]),
      ),
      current,
      required: [],
      budgetBytes: 1000,
    });
    expectDestinationsFirst(grown);
    for (const w of grown.writes) expect(Buffer.byteLength(w.text)).toBeLessThanOrEqual(1000);
    expect(grown.placement.size).toBe(sizes.length);
  });
});
