/**
 * The wildcard certificate of the platform's apps domain (docs/customdomains.md, "The auto-generated
 * subdomain"): ONE certificate for `*.<apps domain>` serves every project's auto-generated subdomain,
 * so the CA's certificates-per-registered-domain limit (Let's Encrypt: 50 a week) is spent once per
 * renewal, not once per project. A wildcard can only be validated by DNS-01 (RFC 8555 §7.1.3,
 * §8.4): the TXT record `_acme-challenge.<apps domain>` is written into the platform's own zone by
 * an RFC 2136 update signed with TSIG (dns/update-client.ts), the same path as the challenge zone.
 *
 * The certificate lives in one `kubernetes.io/tls` Secret in the operator's namespace, never in a
 * tenant's namespace (its key serves every project's subdomain); the data plane reads it from there
 * through a TLSCertificateDelegation (subdomain.ts). It is kept like every certificate of Portico's,
 * through the same parts as a CustomDomain's:
 *
 * - the operator's ACME issuers with their failover (acme/issuer-set.ts): the order goes to the
 *   issuer the selection picks (a renewal: the one that issued the certificate, named in the
 *   Secret's `portico.dev/acme-issuer`), a CA that keeps failing is passed over for the next;
 * - that issuer's order budget and line (acme/order-budget.ts), under the key `orderKey`, the
 *   operator's namespace as its tenant and the apps domain's registered domain: the wildcard's
 *   orders count against the same account and registered-domain limits as the CustomDomains';
 * - one order at a time in an `IssuanceTracker`, retried after a failure by the CustomDomains'
 *   schedule (`--issuance-first-retry-seconds`, doubling to an hour; a CA's Retry-After when later:
 *   issuance-state.ts `lastIssuanceFailure`);
 * - the CAA check of RFC 8659 for a wildcard (acme/issuer.ts, dns/caa.ts: the base domain's RRset,
 *   `issuewild` before `issue`), whose verdict names the record found and the record to add;
 * - the issued certificate judged before it is written (`issuedCertificateProblemFor`) and written
 *   until the API server answers (`untilApiAnswers`).
 *
 * Ordered when the Secret holds no certificate that can serve the apps domain now, and renewed as a
 * CustomDomain's certificate is (customdomain/renewal.ts `RenewalPlanner`, the same instance): at a
 * time chosen uniformly at random in the issuing CA's ACME Renewal Information window (RFC 9773
 * §4.2), asked again after the CA's Retry-After (clamped to [1 min, 6 h]) or when the Secret's
 * `portico.dev/verify-requested-at` changes (the Secret is watched), an hour after a failed
 * request; two thirds into its validity without ARI. The renewal order names the old certificate
 * in `replaces` (§5). The decision is kept on the Secret (`portico.dev/renewal-info`,
 * apps-renewal.ts), so a restart plans from it; a new decision is a Normal Event
 * `RenewalScheduled` on the Secret. A failed order is a Warning Event on the Secret (`kubectl get
 * events -n <operator namespace>`), once per reason and message, and the Projects'
 * `status.subdomain` carries the state's message.
 *
 * Runs on the leader only (started with the controllers).
 */
import {
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type KubeConfig,
  type KubernetesObjectApi,
  type V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  ACME_ISSUER_ANNOTATION,
  FIELD_MANAGER,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  REPLACES_ANNOTATION,
  VERIFY_REQUESTED_AT_ANNOTATION,
  type CertificateStatus,
} from '../../api/customdomain.js';
import { eventTypeOf } from '../../api/reasons.js';
import { ResilientInformer } from '../../kube/informer.js';
import { IssuanceTracker, orderOutcomeOf } from '../../acme/issuance-tracker.js';
import { IssuanceCancelledError, type Dns01Publisher, type IssueOptions } from '../../acme/issuer.js';
import type { IssuedByCertificate, IssuerOrderRequest } from '../../acme/issuer-set.js';
import type { OrderDecision, OrderOutcome } from '../../acme/order-decision.js';
import { leafCertificate } from '../../certificates/inspect.js';
import { parsedSecret, tlsSecretProblem } from '../../certificates/parsed-secret.js';
import { acmeChallengeName } from '../../dns/challenge-delegation.js';
import { registeredDomain } from '../../dns/records.js';
import { appsWildcard } from '../../domain/apps-subdomain.js';
import { isNotFound } from '../../kube/errors.js';
import type { EventRecorder } from '../../kube/events.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import { lastIssuanceFailure, pendingRetry } from '../customdomain/issuance-state.js';
import {
  IssuedCertificateUnusableError,
  issuedCertificateProblemFor,
  leafAriCertId,
  TLS_CERT,
  untilApiAnswers,
} from '../customdomain/phases/issuance.js';
import { heldCertificateStatus, type RenewalPlanning } from '../customdomain/renewal.js';
import {
  nextLookAt,
  parseRenewalRecord,
  previousRenewal,
  RENEWAL_INFO_ANNOTATION,
  renewalCheckRequested,
  renewalRecordValue,
  renewalSentence,
} from './apps-renewal.js';

/** The longest single wait of the timer (setTimeout's limit is about 24.8 days). */
const MAX_TIMER_MS = 24 * 60 * 60_000;

/**
 * The prefix of the wildcard's key in the order budgets (`AppsDomainCertificate.orderKey`): a
 * CustomDomain's key is `namespace/name`, and no namespace has a colon, so the two never meet.
 */
export const APPS_CERTIFICATE_ORDER_KEY_PREFIX = 'apps-domain-certificate:';

/** What the Projects' status reads of the wildcard certificate. */
export interface AppsCertificateState {
  /** True while the Secret holds a certificate that serves the apps domain now. */
  readonly ready: boolean;
  /** Why not (`WildcardCertificatePending`'s message), or what it is. */
  readonly message: string;
  /** RFC 3339, of the certificate the Secret holds. */
  readonly notAfter?: string;
  /**
   * UpperCamelCase: `Issued`, `Ordering`, `OrderQueued` (the order budget's line), or the last
   * failed attempt's reason (a CertificateReady reason: `CAAForbidsIssuance`, `IssuanceFailed`, ...).
   */
  readonly reason?: string;
}

/**
 * The parts of the operator's ACME issuers (acme/issuer-set.ts `AcmeIssuerSet`) the wildcard's
 * orders go through: a turn in the selected issuer's order budget, the order, and its settlement.
 */
export interface AppsCertificateIssuer {
  request(req: IssuerOrderRequest, now: Date): OrderDecision;
  settled(key: string, outcome: OrderOutcome, now: Date): void;
  withdraw(key: string): void;
  issue(
    hostname: string,
    log: Logger,
    options: IssueOptions & { issuedBy?: string | undefined },
  ): Promise<IssuedByCertificate>;
}

export interface AppsCertificateOptions {
  /** The platform's apps domain, normalized (domain/apps-subdomain.ts). */
  readonly appsDomain: string;
  /** The Secret the certificate is kept in: the operator's namespace. */
  readonly secret: { readonly namespace: string; readonly name: string };
  /** Reads the Secret; patches its `portico.dev/renewal-info` annotation (a JSON merge patch). */
  readonly core: Pick<CoreV1Api, 'readNamespacedSecret' | 'patchNamespacedSecret'>;
  readonly objects: KubernetesObjectApi;
  /** The operator's ACME issuers, with failover and their order budgets (the CustomDomains' set). */
  readonly issuer: AppsCertificateIssuer;
  /** Writes the DNS-01 TXT record into the apps domain's zone (RFC 2136 with TSIG). */
  readonly dns01: Dns01Publisher;
  /** Milliseconds before the first retry of a failed order; each further failure doubles it, to an hour. */
  readonly firstRetryMs: number;
  /**
   * Decides the renewal time by the issuing CA's ACME Renewal Information (RFC 9773), or two thirds
   * into the validity without it: the CustomDomains' planner.
   */
  readonly renewal: RenewalPlanning;
  /**
   * The longest wait, in milliseconds, between two looks at the Secret while its certificate serves
   * (the operator's `--resync-seconds`): a change the watch missed (see `kubeConfig`) is seen
   * within this.
   */
  readonly recheckMs: number;
  /**
   * With it, the Secret is watched (a watch of that one name, `fieldSelector metadata.name=<name>`,
   * while started): a verify request on it, or the Secret changed or removed, is looked at at once.
   * Without it, only every `recheckMs`.
   */
  readonly kubeConfig?: KubeConfig;
  /** Called when the state changes (a certificate stored, an order failed or queued). */
  readonly onChange: () => void;
  /** Records the Warning Event of a failed order on the Secret. */
  readonly events?: Pick<EventRecorder, 'record'>;
  /**
   * Called once, at the first read of a Secret that holds a usable certificate: a certificate
   * issued before this process started, which the order budget should count (its notBefore and
   * the issuer named on the Secret), as the CustomDomains' are after a restart.
   */
  readonly countPastCertificate?: (certificate: {
    notBefore: string;
    acmeIssuer: string | undefined;
    registeredDomain: string;
  }) => void;
  readonly log: Logger;
  readonly now?: () => Date;
}

/** A usable certificate in the Secret: its status before planning, its PEM and the Secret's annotations. */
interface Usable {
  status: CertificateStatus;
  certificatePem: string;
  annotations: Readonly<Record<string, string>>;
}

/** The Secret's certificate: usable, or what is wrong with it; undefined: no Secret. */
type Held = Usable | { problem: string } | undefined;

/** The `*.<apps domain>` certificate: issued, stored and renewed. */
export class AppsDomainCertificate {
  /** Its key in the ACME issuers' order budgets and lines (never a CustomDomain's key). */
  readonly orderKey: string;
  readonly #o: AppsCertificateOptions;
  readonly #log: Logger;
  readonly #wildcard: string;
  readonly #tracker: IssuanceTracker;
  #state: AppsCertificateState;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #counted = false;
  /** The reason and message of the last Event recorded, so one failure repeated is recorded once. */
  #evented: string | undefined;
  /** The watch of the Secret; undefined without `kubeConfig`. */
  readonly #watch: ResilientInformer<V1Secret> | undefined;

  constructor(options: AppsCertificateOptions) {
    this.#o = options;
    this.#wildcard = appsWildcard(options.appsDomain);
    this.#log = options.log.child({ appsDomainCertificate: this.#wildcard });
    this.orderKey = `${APPS_CERTIFICATE_ORDER_KEY_PREFIX}${options.secret.namespace}/${options.secret.name}`;
    this.#state = { ready: false, message: `the certificate for ${this.#wildcard} is being read` };
    // An order ended: its issuer's budget frees the slot (and counts a failed validation), and the
    // Secret is looked at again at once.
    this.#tracker = new IssuanceTracker((key) => {
      this.#o.issuer.settled(key, orderOutcomeOf(this.#tracker.lastOutcome(key)), this.#now());
      this.#schedule(0);
    });
    const { namespace, name } = options.secret;
    this.#watch =
      options.kubeConfig &&
      new ResilientInformer<V1Secret>(options.kubeConfig, {
        path: `/api/v1/namespaces/${namespace}/secrets`,
        fieldSelector: `metadata.name=${name}`,
        resyncMs: 0,
        log: this.#log,
        // The watch only says "look again": the check reads the Secret itself, so the cache keeps
        // no key material.
        keep: (secret) => {
          delete secret.data;
        },
        // Its own writes come back too (a renewal decision, a new certificate): the look after one
        // finds nothing to do. A failed order's retry time is the tracker's, not the Secret's, so
        // a change does not bring a retry forward.
        onChange: () => {
          this.#schedule(0);
        },
      });
  }

  /** `namespace/name` of the Secret, as an HTTPProxy's `virtualhost.tls.secretName` names it. */
  get secretReference(): string {
    return `${this.#o.secret.namespace}/${this.#o.secret.name}`;
  }

  get state(): AppsCertificateState {
    return this.#state;
  }

  /** Reads the Secret, orders a certificate when it holds none that serves, and schedules the next check. */
  start(): void {
    this.#watch?.start();
    this.#schedule(0);
  }

  /** Looks at the Secret again now: the wildcard's turn in an order budget came (the set's `requeue`). */
  wake(): void {
    this.#schedule(0);
  }

  /** Stops the timer and abandons an order in flight (its challenge withdrawn); resolves when both ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await Promise.all([this.#watch?.stop(), this.#tracker.stop()]);
    await this.#running;
  }

  #now(): Date {
    return this.#o.now?.() ?? new Date();
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        this.#run();
      },
      Math.max(0, Math.min(ms, MAX_TIMER_MS)),
    );
  }

  /** One check at a time; a wake-up during one runs another right after it. */
  #run(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#check()
      .catch((err: unknown) => {
        this.#log.warn({ err }, 'the apps domain certificate check failed; retrying');
        this.#schedule(this.#o.firstRetryMs);
      })
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.#schedule(0);
        }
      });
  }

  #set(state: AppsCertificateState): void {
    const changed = state.ready !== this.#state.ready || state.message !== this.#state.message;
    this.#state = state;
    if (!changed) return;
    this.#log.info(
      { ready: state.ready, reason: state.reason, message: state.message },
      'apps domain certificate state',
    );
    this.#o.onChange();
  }

  async #check(): Promise<void> {
    const now = this.#now();
    let held: Held;
    try {
      held = this.#judge(await this.#read(), now);
    } catch (err) {
      this.#log.warn({ err }, 'could not read the apps domain certificate Secret');
      this.#schedule(this.#o.firstRetryMs);
      return;
    }
    const usable = held !== undefined && 'status' in held ? held : undefined;
    if (usable && !this.#counted)
      this.#o.countPastCertificate?.({
        notBefore: usable.status.notBefore,
        acmeIssuer: usable.status.acmeIssuer,
        registeredDomain: registeredDomain(this.#o.appsDomain),
      });
    this.#counted = true;
    let replaces: string | undefined;
    if (usable) {
      const planned = await this.#plan(usable, now);
      if (now.getTime() < Date.parse(planned.renewalTime)) {
        this.#set({
          ready: true,
          notAfter: planned.notAfter,
          reason: 'Issued',
          message: `${this.#wildcard} is valid until ${planned.notAfter}; ${renewalSentence(planned)}`,
        });
        this.#schedule(nextLookAt(planned, now, this.#o.recheckMs) - now.getTime());
        return;
      }
      replaces = planned.ari?.certId;
    }
    // An order is due: the first, a renewal, or one replacing a Secret that cannot serve.
    // An order in flight: its settlement looks again.
    if (!this.#tracker.inFlight(this.orderKey)) await this.#orderDue(held, usable, now, replaces);
  }

  /**
   * The renewal decision for the usable certificate: the CustomDomains' planner, from the decision
   * kept on the Secret (`portico.dev/renewal-info`) when it is for this certificate, forced by a new
   * `portico.dev/verify-requested-at`. A new decision is written back to the Secret and told in a
   * Normal Event; a failed write is logged, and the next look plans again. Never throws.
   */
  async #plan(usable: Usable, now: Date): Promise<CertificateStatus> {
    const { annotations, certificatePem } = usable;
    const kept = annotations[RENEWAL_INFO_ANNOTATION];
    const record = parseRenewalRecord(kept);
    const request = annotations[VERIFY_REQUESTED_AT_ANNOTATION];
    const force = renewalCheckRequested(request, record);
    const planned = await this.#o.renewal.plan(
      usable.status,
      // Computed only when the CA is asked; a leaf that does not parse is a failed request.
      () => Promise.resolve().then(() => leafAriCertId(leafCertificate(certificatePem))),
      previousRenewal(usable.status, record),
      now,
      force,
      this.#log,
    );
    // Nothing to keep without ARI but an acted-on verify request.
    if (planned.ari === undefined && !force) return planned;
    const value = renewalRecordValue(planned, force ? request : record?.lastVerifyRequest);
    if (value === kept) return planned;
    try {
      await this.#o.core.patchNamespacedSecret(
        { ...this.#o.secret, body: { metadata: { annotations: { [RENEWAL_INFO_ANNOTATION]: value } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    } catch (err) {
      this.#log.warn({ err }, 'could not record the renewal decision on the apps domain certificate Secret');
      return planned;
    }
    const before = record?.serialNumber === planned.serialNumber ? record.renewalTime : undefined;
    if (planned.renewalTime !== before)
      await this.#event(
        'RenewalScheduled',
        `${this.#wildcard} (serial ${planned.serialNumber}, valid until ${planned.notAfter}) is ${renewalSentence(planned)}`,
      );
    return planned;
  }

  /**
   * An order is due and none is in flight: wait for the retry after a failure, or for a turn in the
   * order budget, or start it.
   */
  async #orderDue(
    held: Held,
    usable: Usable | undefined,
    now: Date,
    replaces: string | undefined,
  ): Promise<void> {
    const key = this.orderKey;
    const valid = usable ? { ready: true, notAfter: usable.status.notAfter } : { ready: false };
    const validity = usable ? `${this.#wildcard} is valid until ${usable.status.notAfter}; ` : '';
    const failure = lastIssuanceFailure(
      this.#tracker.lastOutcome(key),
      undefined,
      false,
      this.#o.firstRetryMs,
    );
    const retry = pendingRetry(failure, now);
    if (retry) {
      const message = `${validity}the ${usable ? 'renewal' : 'order'} of ${this.#wildcard} failed (${retry.reason}): ${retry.message} Next attempt at ${retry.retryAt.toISOString()}.`;
      this.#set({ ...valid, reason: retry.reason, message });
      await this.#event(retry.reason, message);
      this.#schedule(retry.retryAt.getTime() - now.getTime());
      return;
    }
    const decision = this.#o.issuer.request(
      {
        key,
        tenant: this.#o.secret.namespace,
        hostname: this.#wildcard,
        registeredDomain: registeredDomain(this.#o.appsDomain),
        kind: usable ? 'renewal' : 'first-issuance',
        issuedBy: usable?.status.acmeIssuer,
        queuedAt: now,
      },
      now,
    );
    if (!decision.admitted) {
      this.#set({ ...valid, reason: 'OrderQueued', message: `${validity}${decision.message}` });
      this.#schedule(decision.expectedAt.getTime() - now.getTime());
      return;
    }
    const problem =
      held !== undefined && 'problem' in held ? ` (Secret ${this.#o.secret.name} ${held.problem})` : '';
    this.#order(usable?.status.acmeIssuer, replaces);
    this.#set({
      ...valid,
      reason: 'Ordering',
      message: `${validity}ordering ${usable ? 'its renewal' : `the certificate for ${this.#wildcard}`} by DNS-01 in ${this.#o.appsDomain}'s zone${problem}`,
    });
  }

  /**
   * Starts the order in the background; its settlement schedules the next check. A renewal names
   * the ARI identifier of the certificate it replaces (RFC 9773 §5), passed to the CA that issued it.
   */
  #order(issuedBy: string | undefined, replaces: string | undefined): void {
    const wildcard = this.#wildcard;
    this.#tracker.start(this.orderKey, wildcard, async (signal) => {
      this.#log.info({ identifier: wildcard }, 'ordering the apps domain wildcard certificate (dns-01)');
      const issued = await this.#o.issuer.issue(wildcard, this.#log, {
        dns01RecordName: acmeChallengeName(this.#o.appsDomain),
        dns01Publisher: this.#o.dns01,
        issuedBy,
        ...(replaces ? { replaces } : {}),
        signal,
      });
      if (signal.aborted) throw new IssuanceCancelledError(wildcard);
      const unusable = issuedCertificateProblemFor(
        { secretName: this.#o.secret.name, hostname: wildcard },
        issued,
        this.#now(),
      );
      if (unusable !== undefined) throw new IssuedCertificateUnusableError(unusable);
      await untilApiAnswers(() => this.#write(issued, replaces), wildcard, signal, this.#log);
      this.#log.info(
        { identifier: wildcard, acmeIssuer: issued.acmeIssuer },
        'apps domain wildcard certificate stored',
      );
    });
  }

  /** What the Secret holds: a usable certificate for the wildcard, what is wrong with it, or nothing. */
  #judge(secret: V1Secret | undefined, now: Date): Held {
    if (secret === undefined) return undefined;
    const parsed = parsedSecret(secret);
    const problem = tlsSecretProblem(parsed, this.#wildcard, now);
    if (problem !== undefined || parsed === undefined) return { problem: problem ?? '' };
    const annotations = secret.metadata?.annotations ?? {};
    return {
      status: heldCertificateStatus(this.#o.secret.name, parsed.facts, annotations),
      certificatePem: Buffer.from(secret.data?.[TLS_CERT] ?? '', 'base64').toString('utf8'),
      annotations,
    };
  }

  /** A Warning Event on the Secret, unless the same reason and message was the last one recorded. */
  async #event(reason: string, message: string): Promise<void> {
    const said = `${reason}\u0000${message.replace(/Next attempt at \S+$/, '')}`;
    if (this.#evented === said || this.#o.events === undefined) return;
    this.#evented = said;
    await this.#o.events.record(
      { apiVersion: 'v1', kind: 'Secret', metadata: { ...this.#o.secret } },
      eventTypeOf(reason),
      reason,
      message,
    );
  }

  async #read(): Promise<V1Secret | undefined> {
    try {
      return await this.#o.core.readNamespacedSecret(this.#o.secret);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async #write(issued: IssuedByCertificate, replaces: string | undefined): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        ...this.#o.secret,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
        annotations: {
          'portico.dev/acme-order': issued.orderUrl,
          [ACME_ISSUER_ANNOTATION]: issued.acmeIssuer,
          [REPLACES_ANNOTATION]: replaces ?? '',
        },
      },
      type: 'kubernetes.io/tls',
      data: {
        [TLS_CERT]: Buffer.from(issued.certificatePem).toString('base64'),
        'tls.key': Buffer.from(issued.privateKeyPem).toString('base64'),
      },
    };
    // Server-side apply (create + patch): what the chart's RBAC grants on Secrets, no update.
    await serverSideApply(this.#o.objects, body, { fieldManager: FIELD_MANAGER, force: true });
  }
}
