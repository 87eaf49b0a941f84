/**
 * Which config ConfigMap (shard, `ratelimit/config-schema.ts`) holds which policy: the
 * desired-state step of the config reconcile, pure and unit-tested (docs/ratelimits.md, "The
 * compiled config"; docs/adr/2026-11-25-ratelimit-config-shards.md): the compiled config has no
 * cluster-wide size ceiling, and one policy change does not rewrite every shard.
 *
 * Rules:
 * - a policy stays in the shard that holds it while the shard has room; a shard that grew past its
 *   budget keeps its unchanged entries first and moves the changed ones out;
 * - a policy without a shard (new, moved out, or in a shard deleted by hand) goes into the first shard
 *   with room, by index, that moves none of its own policies out, else into a new shard at the lowest
 *   free index (so moves never form a cycle, and each can be written before the shard it leaves);
 * - shard 0 always exists, shards are never deleted (an empty one is a few bytes), and every shard a
 *   rate-limit server still holds policies from (`required`) is written again, so a shard deleted by
 *   hand is re-created;
 * - only shards whose text changes are written, those that gain a policy before those that only
 *   lose one, so a server never sees a moving policy missing from every shard.
 */
import {
  configShardIndex,
  configShardName,
  renderConfigEntries,
  renderedConfigBytes,
} from '../../ratelimit/config-schema.js';

/** A config shard as the operator's cache has it. */
export interface CurrentShard {
  readonly name: string;
  /** The text of `config.json` (undefined: no such key). */
  readonly text: string | undefined;
  /** Its entries by domain: the text `renderCompiledEntry` gives for it ('' for an invalid entry). */
  readonly entries: ReadonlyMap<string, string>;
}

export interface ShardPlanInput {
  /** `--config-name`: shard 0's name and the others' prefix. */
  readonly configName: string;
  /** The entry text of every policy that should be enforced, by domain. */
  readonly desired: ReadonlyMap<string, string>;
  /** The config shards that exist. */
  readonly current: readonly CurrentShard[];
  /** Names of shards that must exist (those a rate-limit server retains after a deletion). */
  readonly required: readonly string[];
  /** Bytes of `config.json` a shard may hold (CONFIG_SHARD_BUDGET_BYTES). */
  readonly budgetBytes: number;
}

export interface ShardWrite {
  readonly name: string;
  readonly text: string;
  /** Domains the shard has now and will not have (deleted policies, and policies moving out). */
  readonly removes: readonly string[];
}

export interface ShardPlan {
  /** The shards to apply, in this order: those that gain a policy, then those that only lose some. */
  readonly writes: readonly ShardWrite[];
  /** The shard of each desired domain. */
  readonly placement: ReadonlyMap<string, string>;
}

interface Member {
  readonly domain: string;
  readonly text: string;
  readonly bytes: number;
}

class Bin {
  readonly members: Member[] = [];
  /** It sends a policy it holds to another shard; nothing moves into it (so moves never form a cycle). */
  evicting = false;
  #sum = 0;

  constructor(
    readonly index: number,
    readonly name: string,
  ) {}

  fits(member: Member, budget: number): boolean {
    return renderedConfigBytes([0]) - 2 + this.#sum + member.bytes + 2 <= budget;
  }

  add(member: Member): void {
    this.members.push(member);
    this.#sum += member.bytes + 2;
  }
}

function byDomain(a: Member, b: Member): number {
  return a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0;
}

/**
 * Where each domain is now: the lowest-index shard that has it; and the shards that have a copy of a
 * domain located in another one.
 */
function locate(input: ShardPlanInput): { located: Map<string, number>; duplicates: Set<number> } {
  const located = new Map<string, number>();
  const duplicates = new Set<number>();
  const shards = input.current
    .map((s) => ({ s, index: configShardIndex(input.configName, s.name) ?? -1 }))
    .filter((x) => x.index >= 0)
    .sort((a, b) => a.index - b.index);
  for (const { s, index } of shards) {
    for (const domain of s.entries.keys()) {
      if (!input.desired.has(domain)) continue;
      if (!located.has(domain)) located.set(domain, index);
      else if (located.get(domain) !== index) duplicates.add(index);
    }
  }
  return { located, duplicates };
}

function makeBins(input: ShardPlanInput): Map<number, Bin> {
  const bins = new Map<number, Bin>([[0, new Bin(0, configShardName(input.configName, 0))]]);
  for (const name of [...input.current.map((s) => s.name), ...input.required]) {
    const index = configShardIndex(input.configName, name);
    if (index !== undefined && !bins.has(index)) bins.set(index, new Bin(index, name));
  }
  return bins;
}

/** Fills each shard with the policies it holds while they fit; returns those that did not. */
function keepInPlace(
  input: ShardPlanInput,
  bins: Map<number, Bin>,
  currentByName: Map<string, CurrentShard>,
): Member[] {
  const { located, duplicates } = locate(input);
  for (const index of duplicates) {
    const bin = bins.get(index);
    if (bin !== undefined) bin.evicting = true;
  }
  const members = new Map<number, Member[]>();
  const unplaced: Member[] = [];
  for (const [domain, text] of input.desired) {
    const member = { domain, text, bytes: Buffer.byteLength(text, 'utf8') };
    const index = located.get(domain);
    const list = index === undefined ? undefined : (members.get(index) ?? []);
    if (index === undefined || list === undefined) {
      unplaced.push(member);
      continue;
    }
    list.push(member);
    members.set(index, list);
  }
  for (const [index, list] of members) {
    const bin = bins.get(index);
    if (bin === undefined) {
      unplaced.push(...list);
      continue;
    }
    const before = currentByName.get(bin.name)?.entries;
    const unchanged = (m: Member): boolean => before?.get(m.domain) === m.text;
    list.sort((a, b) => Number(unchanged(b)) - Number(unchanged(a)) || byDomain(a, b));
    for (const m of list) {
      if (bin.fits(m, input.budgetBytes)) {
        bin.add(m);
      } else {
        unplaced.push(m);
        bin.evicting = true;
      }
    }
  }
  return unplaced.sort(byDomain);
}

function place(input: ShardPlanInput, bins: Map<number, Bin>, unplaced: readonly Member[]): void {
  for (const m of unplaced) {
    const ordered = [...bins.values()].sort((a, b) => a.index - b.index);
    let bin = ordered.find((b) => !b.evicting && b.fits(m, input.budgetBytes));
    if (bin === undefined) {
      let index = 0;
      while (bins.has(index)) index++;
      bin = new Bin(index, configShardName(input.configName, index));
      bins.set(index, bin);
    }
    bin.add(m);
  }
}

/** The shards to write and where each policy goes. */
export function planShards(input: ShardPlanInput): ShardPlan {
  const currentByName = new Map(input.current.map((s) => [s.name, s]));
  const bins = makeBins(input);
  place(input, bins, keepInPlace(input, bins, currentByName));
  const gaining: (ShardWrite & { evicting: boolean })[] = [];
  const losing: ShardWrite[] = [];
  const placement = new Map<string, string>();
  for (const bin of [...bins.values()].sort((a, b) => a.index - b.index)) {
    for (const m of bin.members) placement.set(m.domain, bin.name);
    const text = renderConfigEntries(bin.members);
    const current = currentByName.get(bin.name);
    if (current?.text === text) continue;
    const gains = current === undefined || bin.members.some((m) => current.entries.get(m.domain) !== m.text);
    const kept = new Set(bin.members.map((m) => m.domain));
    const removes = [...(current?.entries.keys() ?? [])].filter((d) => !kept.has(d));
    if (gains) gaining.push({ name: bin.name, text, removes, evicting: bin.evicting });
    else losing.push({ name: bin.name, text, removes });
  }
  // Shards that send a policy elsewhere after those that receive it.
  const first = gaining.filter((w) => !w.evicting).concat(gaining.filter((w) => w.evicting));
  return {
    writes: [...first.map(({ name, text, removes }) => ({ name, text, removes })), ...losing],
    placement,
  };
}
