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
 * through a TLSCertificateDelegation (subdomain.ts). It is kept like any other certificate: ordered
 * when the Secret holds none that serves the apps domain, renewed two thirds into its validity
 * (certificates/inspect.ts `defaultRenewalTime`), and a failed order is retried after the
 * operator's first retry (`--issuance-first-retry-seconds`), doubling up to an hour.
 *
 * Runs on the leader only (started with the controllers).
 */
import type { CoreV1Api, KubernetesObjectApi, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import type { IssuedCertificate } from '../../acme/issuer.js';
import { certificateServes, defaultRenewalTime, inspectCertificate } from '../../certificates/inspect.js';
import { acmeChallengeName } from '../../dns/challenge-delegation.js';
import { appsWildcard } from '../../domain/apps-subdomain.js';
import { isNotFound } from '../../kube/errors.js';
import { serverSideApply } from '../../kube/server-side-apply.js';

/** The most a failed order waits for its retry, milliseconds. */
const MAX_RETRY_MS = 60 * 60_000;
/** The longest single wait of the timer (setTimeout's limit is about 24.8 days). */
const MAX_TIMER_MS = 24 * 60 * 60_000;

/** What the Projects' status reads of the wildcard certificate. */
export interface AppsCertificateState {
  /** True while the Secret holds a certificate that serves the apps domain now. */
  readonly ready: boolean;
  /** Why not (`WildcardCertificatePending`'s message), or what it is. */
  readonly message: string;
  /** RFC 3339, of the certificate the Secret holds. */
  readonly notAfter?: string;
}

export interface AppsCertificateOptions {
  /** The platform's apps domain, normalized (domain/apps-subdomain.ts). */
  readonly appsDomain: string;
  /** The Secret the certificate is kept in: the operator's namespace. */
  readonly secret: { readonly namespace: string; readonly name: string };
  readonly core: CoreV1Api;
  readonly objects: KubernetesObjectApi;
  /**
   * Orders a certificate for `identifier` (`*.<apps domain>`) answering DNS-01 with the TXT record
   * at `dns01RecordName` (acme/issuer.ts `AcmeIssuer.issue` of an issuer whose DNS-01 publisher
   * writes into the apps domain's zone).
   */
  readonly issue: (
    identifier: string,
    log: Logger,
    options: { dns01RecordName: string },
  ) => Promise<IssuedCertificate>;
  /** Milliseconds before the first retry of a failed order; each further failure doubles it. */
  readonly firstRetryMs: number;
  /** Called when the state changes (a certificate stored, or an order failed). */
  readonly onChange: () => void;
  readonly log: Logger;
  readonly now?: () => Date;
}

/** The `*.<apps domain>` certificate: issued, stored and renewed. */
export class AppsDomainCertificate {
  readonly #o: AppsCertificateOptions;
  readonly #log: Logger;
  #state: AppsCertificateState;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #failures = 0;
  #stopped = false;

  constructor(options: AppsCertificateOptions) {
    this.#o = options;
    this.#log = options.log.child({ appsDomainCertificate: appsWildcard(options.appsDomain) });
    this.#state = {
      ready: false,
      message: `the certificate for ${appsWildcard(options.appsDomain)} is being read`,
    };
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
    this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        this.#running = this.#check().finally(() => {
          this.#running = undefined;
        });
      },
      Math.min(ms, MAX_TIMER_MS),
    );
  }

  #set(state: AppsCertificateState): void {
    const changed = state.ready !== this.#state.ready || state.message !== this.#state.message;
    this.#state = state;
    if (changed) this.#o.onChange();
  }

  async #check(): Promise<void> {
    const now = this.#o.now?.() ?? new Date();
    const wildcard = appsWildcard(this.#o.appsDomain);
    // A name under the apps domain: what the certificate must serve (node:crypto's checkHost).
    const probe = `portico-probe.${this.#o.appsDomain}`;
    let stored: { chain: string; key: string } | undefined;
    try {
      stored = await this.#read();
    } catch (err) {
      this.#log.warn({ err }, 'could not read the apps domain certificate Secret');
      this.#schedule(this.#o.firstRetryMs);
      return;
    }
    if (stored && certificateServes(stored.chain, stored.key, probe, now)) {
      const facts = inspectCertificate(stored.chain);
      const renewAt = defaultRenewalTime(facts);
      if (now < renewAt) {
        this.#failures = 0;
        this.#set({
          ready: true,
          message: `${wildcard} is valid until ${facts.notAfter}; renewed from ${renewAt.toISOString()}`,
          notAfter: facts.notAfter,
        });
        this.#schedule(renewAt.getTime() - now.getTime());
        return;
      }
      this.#set({
        ready: true,
        message: `${wildcard} is valid until ${facts.notAfter}; renewing`,
        notAfter: facts.notAfter,
      });
    }
    try {
      this.#log.info({ identifier: wildcard }, 'ordering the apps domain wildcard certificate (dns-01)');
      const issued = await this.#o.issue(wildcard, this.#log, {
        dns01RecordName: acmeChallengeName(this.#o.appsDomain),
      });
      await this.#write(issued);
      this.#log.info({ identifier: wildcard }, 'apps domain wildcard certificate stored');
      this.#failures = 0;
      this.#schedule(0);
    } catch (err) {
      const delay = Math.min(MAX_RETRY_MS, this.#o.firstRetryMs * 2 ** this.#failures);
      this.#failures += 1;
      const message = err instanceof Error ? err.message : String(err);
      this.#log.warn({ err, retryInMs: delay }, 'the apps domain wildcard certificate order failed');
      const keep =
        this.#state.ready && stored !== undefined && certificateServes(stored.chain, stored.key, probe, now);
      this.#set({
        ready: keep,
        message: `the order for ${wildcard} failed (${message}); retried at ${new Date(now.getTime() + delay).toISOString()}`,
        ...(keep && this.#state.notAfter ? { notAfter: this.#state.notAfter } : {}),
      });
      this.#schedule(delay);
    }
  }

  async #read(): Promise<{ chain: string; key: string } | undefined> {
    let secret: V1Secret;
    try {
      secret = await this.#o.core.readNamespacedSecret(this.#o.secret);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    const crt = secret.data?.['tls.crt'];
    const key = secret.data?.['tls.key'];
    if (!crt || !key) return undefined;
    return {
      chain: Buffer.from(crt, 'base64').toString('utf8'),
      key: Buffer.from(key, 'base64').toString('utf8'),
    };
  }

  async #write(issued: IssuedCertificate): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        ...this.#o.secret,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
        annotations: { 'portico.dev/acme-order': issued.orderUrl },
      },
      type: 'kubernetes.io/tls',
      data: {
        'tls.crt': Buffer.from(issued.certificatePem).toString('base64'),
        'tls.key': Buffer.from(issued.privateKeyPem).toString('base64'),
      },
    };
    // Server-side apply (create + patch): what the chart's RBAC grants on Secrets, no update.
    await serverSideApply(this.#o.objects, body, { fieldManager: FIELD_MANAGER, force: true });
  }
}
