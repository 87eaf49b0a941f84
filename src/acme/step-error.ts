/**
 * The common shape of the errors that end one ACME order attempt at a step of the order
 * (RFC 8555 §7.4: new order, authorization, challenge, finalize, certificate): the CA rate-limited it
 * (rate-limit.ts), answered a signed request with a server error (server-error.ts), or did not
 * answer in time (request-timeout.ts). Each carries a stable `code`, the CertificateReady `reason`
 * it gives, what happened (`facts`: the CA's answer, or the unanswered request) and, once the issuer
 * knows it, where in the order it happened (`context`).
 */

/** Where in the issuance a request failed, for the message: set by the issuer. */
export interface AcmeStepContext {
  /** The ACME step, e.g. `new order`, `finalize`. */
  readonly step: string;
  readonly hostname: string;
}

/**
 * Base class of the step errors. A subclass's constructor takes `(facts, context?, options?)`, so
 * `during` can place the same facts at a step; its message is made from the facts and the context.
 */
export abstract class AcmeStepError<Facts, Context extends AcmeStepContext = AcmeStepContext> extends Error {
  /** Stable, upper snake case, e.g. `ACME_RATE_LIMITED`. */
  abstract readonly code: string;
  /** The CertificateReady reason the failed attempt shows (UpperCamelCase). */
  abstract readonly reason: string;
  readonly context: Context | undefined;

  protected constructor(message: string, context: Context | undefined, options?: ErrorOptions) {
    super(message, options);
    this.context = context;
  }

  /** What happened: the CA's answer, or the request it did not answer. */
  protected abstract get facts(): Facts;

  /** The same failure, placed at `step` of the order for `hostname` (this one as its cause). */
  during(step: string, hostname: string): this {
    const Same = this.constructor as new (
      facts: Facts,
      context: AcmeStepContext,
      options: ErrorOptions,
    ) => this;
    return new Same(this.facts, { step, hostname }, { cause: this });
  }
}
