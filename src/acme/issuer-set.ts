/**
 * Several ACME issuers in order (docs/install.md, "Several ACME issuers"): each with its own
 * account, issuer and order queue (its own budget and fair line), and the failover between them
 * (issuer-selection.ts).
 *
 * `AcmeIssuerSet` stands where one issuer and one order queue stood: the reconciler asks it for an
 * order turn (`request`, `withdraw`) and to `issue`; the tracker tells it an order `settled`. A
 * domain's turn is asked of the CA the selection picks for it when it asks (a renewal: the CA that
 * issued the certificate it replaces first); the domain keeps that CA until its order settles or it
 * leaves the line, unless the CA is passed over meanwhile, and then its place moves to the next
 * CA's line. `issue` orders from the CA that admitted the domain and records how the order ended
 * against that CA's health; the certificate names the issuer (`acmeIssuer`).
 */
import type { Logger } from 'pino';
import { normalizeDnsName } from '../domain/hostname.js';
import { issuerMetrics } from '../observability/shared-metrics.js';
import type { IssueOptions, IssuedCertificate } from './issuer.js';
import {
  HEALTHY,
  orderResultOf,
  passedOver,
  recordOrderResult,
  selectIssuer,
  type FailoverPolicy,
  type IssuerHealth,
} from './issuer-selection.js';
import type { OrderDecision, OrderOutcome, OrderRequest } from './order-decision.js';

/** The parts of one CA the set uses. */
export interface IssuerMember {
  /** The configured name: the `ca` metric label and `status.certificate.acmeIssuer`. */
  readonly name: string;
  readonly issuer: {
    issue(hostname: string, log: Logger, options?: IssueOptions): Promise<IssuedCertificate>;
    abandonedCalls(): number;
  };
  readonly queue: {
    request(req: OrderRequest, now: Date): OrderDecision;
    settled(key: string, outcome: OrderOutcome, now: Date): void;
    withdraw(key: string): void;
  };
}

/** An order turn asked of the set: the budget's request, and the CA that issued the certificate a renewal replaces. */
export interface IssuerOrderRequest extends OrderRequest {
  /** `status.certificate.acmeIssuer` of the certificate being renewed, if any. */
  readonly issuedBy?: string | undefined;
}

/** A certificate and the issuer it came from. */
export interface IssuedByCertificate extends IssuedCertificate {
  /** The configured name of the CA that issued it. */
  readonly acmeIssuer: string;
}

export class AcmeIssuerSet {
  readonly #members: ReadonlyMap<string, IssuerMember>;
  readonly #order: readonly string[];
  readonly #policy: FailoverPolicy;
  readonly #now: () => Date;
  readonly #health = new Map<string, IssuerHealth>();
  /** The CA each domain (by key) asked its turn of, until its order settles or it leaves the line. */
  readonly #assigned = new Map<string, string>();
  /** The key of each hostname with an assigned CA (`issue` is called with the hostname), and back. */
  readonly #keyOf = new Map<string, string>();
  readonly #hostnameOf = new Map<string, string>();

  /**
   * @param members the issuers, in order; names unique, at least one
   * @throws RangeError for an empty list or a name used twice
   */
  constructor(members: readonly IssuerMember[], policy: FailoverPolicy, now: () => Date = () => new Date()) {
    if (members.length === 0) throw new RangeError('no ACME issuer is configured');
    this.#members = new Map(members.map((m) => [m.name, m]));
    if (this.#members.size !== members.length) throw new RangeError('ACME issuer names must be unique');
    this.#order = members.map((m) => m.name);
    this.#policy = policy;
    this.#now = now;
    for (const name of this.#order) issuerMetrics.passedOver.set({ ca: name }, 0);
  }

  /** The configured issuer names, in order. */
  get names(): readonly string[] {
    return this.#order;
  }

  /** The health of each issuer now (for logs and tests). */
  health(name: string): IssuerHealth {
    return this.#health.get(name) ?? HEALTHY;
  }

  /**
   * The issuer the domain's order goes to (selection at `now`), then that issuer's order budget
   * decision (`OrderQueue.request`). A domain already in an issuer's line stays there unless that
   * issuer is now passed over.
   */
  request(req: IssuerOrderRequest, now: Date): OrderDecision {
    const current = this.#assigned.get(req.key);
    const nowMs = now.getTime();
    let name = current;
    if (name === undefined || passedOver(this.#health.get(name), nowMs)) {
      name = selectIssuer(this.#order, this.#health, nowMs, req.issuedBy);
    }
    if (current !== undefined && current !== name) this.#member(current).queue.withdraw(req.key);
    this.#assign(req.key, req.hostname, name);
    return this.#member(name).queue.request(req, now);
  }

  /** `OrderQueue.settled` of the issuer the domain's order went to; the domain is free of it. */
  settled(key: string, outcome: OrderOutcome, now: Date): void {
    const name = this.#assigned.get(key);
    if (name === undefined) return;
    this.#member(name).queue.settled(key, outcome, now);
    this.#unassign(key);
  }

  /** `OrderQueue.withdraw` of the issuer the domain asked its turn of. */
  withdraw(key: string): void {
    const name = this.#assigned.get(key);
    if (name === undefined) return;
    this.#member(name).queue.withdraw(key);
    this.#unassign(key);
  }

  /**
   * Orders a certificate for `hostname` from the issuer that admitted it (the selection's choice
   * when none did), and records how it ended against that issuer's health. `options.replaces` (an
   * ARI identifier, RFC 9773) is passed only to the issuer that issued the certificate it names
   * (`issuedBy`): another CA does not know it.
   *
   * @throws what the issuer throws (`AcmeIssuer.issue`)
   */
  async issue(
    hostname: string,
    log: Logger,
    options: IssueOptions & { issuedBy?: string | undefined } = {},
  ): Promise<IssuedByCertificate> {
    const key = this.#keyOf.get(normalizeDnsName(hostname));
    const name =
      (key !== undefined ? this.#assigned.get(key) : undefined) ??
      selectIssuer(this.#order, this.#health, this.#now().getTime(), options.issuedBy);
    const { issuedBy, replaces, ...rest } = options;
    const sameCa = issuedBy === undefined || issuedBy === name;
    const orderLog = log.child({ acmeIssuer: name });
    try {
      const issued = await this.#member(name).issuer.issue(hostname, orderLog, {
        ...rest,
        ...(replaces && sameCa ? { replaces } : {}),
      });
      this.#record(name, orderLog, undefined);
      issuerMetrics.ordersTotal.inc({ ca: name, result: 'valid' });
      return { ...issued, acmeIssuer: name };
    } catch (err) {
      this.#record(name, orderLog, err);
      issuerMetrics.ordersTotal.inc({ ca: name, result: orderResultOf(err).kind });
      throw err;
    }
  }

  /** Calls of cancelled orders still running in the background, over every issuer. */
  abandonedCalls(): number {
    let calls = 0;
    for (const member of this.#members.values()) calls += member.issuer.abandonedCalls();
    return calls;
  }

  #record(name: string, log: Logger, err: unknown): void {
    const nowMs = this.#now().getTime();
    const before = this.#health.get(name) ?? HEALTHY;
    const result = err === undefined ? ({ kind: 'issued' } as const) : orderResultOf(err);
    const after = recordOrderResult(before, result, nowMs, this.#policy);
    this.#health.set(name, after);
    const over = passedOver(after, nowMs);
    issuerMetrics.passedOver.set({ ca: name }, over ? 1 : 0);
    if (over && !passedOver(before, nowMs)) {
      log.warn(
        {
          consecutiveFailures: after.consecutiveFailures,
          passedOverUntil: new Date(after.passedOverUntilMs ?? nowMs).toISOString(),
        },
        'ACME issuer passed over: the next orders go to the next issuer in order',
      );
    } else if (before.consecutiveFailures > 0 && after.consecutiveFailures === 0) {
      log.info({ failuresBefore: before.consecutiveFailures }, 'ACME issuer issued again after failures');
    }
  }

  #member(name: string): IssuerMember {
    const member = this.#members.get(name);
    if (member === undefined) throw new RangeError(`unknown ACME issuer "${name}"`);
    return member;
  }

  #assign(key: string, hostname: string, name: string): void {
    const normalized = normalizeDnsName(hostname);
    this.#assigned.set(key, name);
    this.#keyOf.set(normalized, key);
    this.#hostnameOf.set(key, normalized);
  }

  #unassign(key: string): void {
    this.#assigned.delete(key);
    const hostname = this.#hostnameOf.get(key);
    this.#hostnameOf.delete(key);
    if (hostname !== undefined && this.#keyOf.get(hostname) === key) this.#keyOf.delete(hostname);
  }
}
