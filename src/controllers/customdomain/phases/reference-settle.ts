/**
 * The routing phase's hold on writes for a flavor whose Ingress names an object of the data plane's
 * own API that the data plane reads apart and reports on nowhere (`FlavorWriter.referenceSettle`:
 * Traefik's Middleware; docs/routing.md, "Traefik"). In one pass over a domain's plan:
 * - the objects after an object of that kind written less than `ms` ago, when they would change,
 *   wait (not written; the next pass, `requeueAfterMs` later, writes them), so the Ingress names the
 *   object only once the data plane has had `ms` to load it;
 * - a stale object of that kind is deleted only `ms` after the domain's last write, so the data plane
 *   has had `ms` to load the Ingress that no longer names it.
 * The write times live in memory: after a restart nothing is held back (what was written before has
 * long been loaded). Times are epoch milliseconds from the caller's clock.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { RoutingState } from '../status.js';

/** The flavor's setting: the kind, and the milliseconds the data plane is given. */
export interface SettleRule {
  readonly kind: string;
  readonly ms: number;
}

/** What one pass held back: the objects, the object they wait for, and until when (epoch ms). */
export interface HeldWrites {
  readonly objects: readonly string[];
  readonly by: string;
  readonly writtenAt: number;
  readonly until: number;
}

/** The write times of every domain (one per routing phase). */
export class ReferenceSettle {
  readonly #written = new Map<string, number>();

  /** A pass over the plan of the domain `namespace/name` at `now` under `rule` (none: nothing held). */
  pass(rule: SettleRule | undefined, domain: { namespace: string; name: string }, now: number): SettlePass {
    if (rule !== undefined)
      for (const [key, at] of this.#written) if (at + rule.ms <= now) this.#written.delete(key);
    return new SettlePass(this.#written, rule, domain, now);
  }
}

/** One pass over one domain's plan (`ReferenceSettle.pass`). */
export class SettlePass {
  readonly #written: Map<string, number>;
  readonly #rule: SettleRule | undefined;
  readonly #namespace: string;
  readonly #domainKey: string;
  readonly #now: number;
  #hold: { by: string; writtenAt: number; objects: string[] } | undefined;
  #deleteAfter = 0;

  constructor(
    written: Map<string, number>,
    rule: SettleRule | undefined,
    domain: { namespace: string; name: string },
    now: number,
  ) {
    this.#written = written;
    this.#rule = rule;
    this.#namespace = domain.namespace;
    this.#domainKey = `${domain.namespace}/${domain.name}`;
    this.#now = now;
  }

  /**
   * True when `obj` waits: an object of the rule's kind before it was written less than `ms` ago,
   * and `obj` would change (`upToDate`, asked only then, says whether the data plane has it already).
   */
  holds(obj: KubernetesObject, upToDate: () => boolean = () => false): boolean {
    if (this.#hold === undefined || obj.kind === this.#rule?.kind || upToDate()) return false;
    this.#hold.objects.push(describe(obj));
    return true;
  }

  /** Notes that `obj` was applied (`wrote`: it changed now), and holds what follows it if due. */
  applied(obj: KubernetesObject, wrote: boolean): void {
    const rule = this.#rule;
    if (rule === undefined) return;
    const key = `${this.#namespace}/${obj.kind ?? ''}/${obj.metadata?.name ?? ''}`;
    if (wrote) {
      this.#written.set(this.#domainKey, this.#now);
      if (obj.kind === rule.kind) this.#written.set(key, this.#now);
    }
    const at = obj.kind === rule.kind ? this.#written.get(key) : undefined;
    if (at === undefined || at + rule.ms <= this.#now) return;
    if (this.#hold === undefined || at > this.#hold.writtenAt)
      this.#hold = { by: describe(obj), writtenAt: at, objects: this.#hold?.objects ?? [] };
  }

  /** Whether the stale object `header` may be deleted now; if not, the pass asks to come back. */
  mayDelete(header: { kind: string }): boolean {
    const rule = this.#rule;
    const last = this.#written.get(this.#domainKey);
    if (rule === undefined || header.kind !== rule.kind || last === undefined) return true;
    if (last + rule.ms <= this.#now) return true;
    this.#deleteAfter = Math.max(this.#deleteAfter, last + rule.ms - this.#now);
    return false;
  }

  /** What this pass held back, if anything. */
  held(): HeldWrites | undefined {
    const hold = this.#hold;
    const rule = this.#rule;
    if (hold === undefined || rule === undefined || hold.objects.length === 0) return undefined;
    return { objects: hold.objects, by: hold.by, writtenAt: hold.writtenAt, until: hold.writtenAt + rule.ms };
  }

  /**
   * Routed=False `AwaitingDataPlane` while writes are held back, naming them, the object they wait
   * for and when it was written; undefined when nothing is held.
   */
  heldState(dataPlaneName: string | undefined): RoutingState | undefined {
    const held = this.held();
    if (held === undefined || this.#rule === undefined) return undefined;
    const when = new Date(held.writtenAt).toISOString();
    return {
      kind: 'not-routed',
      reason: 'AwaitingDataPlane',
      message: `${held.objects.join(', ')} is written ${this.#rule.ms / 1000} s after ${held.by} was (at ${when}): ${dataPlaneName ?? 'the data plane'} reads the two apart, reports on neither, and builds no route that names an object it has not loaded.`,
    };
  }

  /** Milliseconds until the pass's held writes or deletions are due; undefined: none. */
  requeueAfterMs(): number | undefined {
    const held = this.held();
    const ms = Math.max(this.#deleteAfter, held === undefined ? 0 : held.until - this.#now);
    return ms > 0 ? ms : undefined;
  }
}

function describe(obj: KubernetesObject): string {
  return `${obj.kind ?? ''} ${obj.metadata?.name ?? ''}`;
}
