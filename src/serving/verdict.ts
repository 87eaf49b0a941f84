/**
 * What the serving check saw, and what it means for the domain (docs/routing.md, "Serving check":
 * with the check on, "Live" means the check saw the issued certificate served and the domain's
 * route answer). Pure: the I/O is in serving-check.ts, which gathers the observations this module
 * judges and words.
 *
 * The verdicts, in the order they are decided:
 * - `unreachable`: no TLS connection, or no HTTP answer, from the data plane (an error code).
 * - `wrong-certificate`: the certificate served for SNI = the hostname is not the one Portico issued
 *   (its serial differs); the message names the one served, and says when it is the data plane's
 *   default certificate or the previous one.
 * - `not-reaching-project`: the HTTP answer for the hostname is the data plane's default backend;
 *   or it is not the answer of the domain's current spec: a redirect domain's answer that is not a
 *   redirect to its target's origin, or a serving domain's answer that is still the redirect the
 *   hostname had before its spec changed (`redirectOrigin`, `previousRedirectOrigin`: the data plane
 *   has not loaded the change yet, as during a project's switch of primary).
 * - `serving`: the issued certificate, and an answer that is not the default backend's and is the
 *   current spec's.
 *
 * How "the project" is recognised: the data plane is asked twice over TLS with SNI = the hostname,
 * `GET <path>` once with `Host: <hostname>` and once with `Host: portico-serving-check.invalid`
 * (RFC 6761 §6.4: `.invalid` names never exist, so no route can match it and the data plane's
 * default backend answers). When both answers have the same status and the same body, the hostname
 * has no route of its own: ingress-nginx's default backend ("default backend - 404"), Traefik's
 * "404 page not found", Envoy's empty 404 all answer every unrouted host alike. Any other answer is
 * the route's (the project's page, an error page of the project, a redirect domain's redirect).
 * Headers other than those named in `projectHeader` are not compared (Date, request ids vary).
 * Where the data plane gives no default answer to compare with (the request fails, or it answers 421
 * Misdirected Request), the answer counts as the route's and the message says it was not compared.
 * Optionally (`projectHeader`), the platform's backends mark their answers with a header, and an
 * answer without it (or with another value) is not the project's.
 */
import type { X509Certificate } from 'node:crypto';
import { CUSTOM_DOMAIN_REASONS, type ReasonEntry } from '../api/reasons.js';
import { subjectAltDnsNames } from '../certificates/inspect.js';

/** The Ready reasons of the serving check (Kubernetes API conventions: UpperCamelCase). */
export type ServingReason = 'Live' | 'CertificateNotServed' | 'ProjectNotReached' | 'DataPlaneUnreachable';

/** The catalogue entries (severity, one line of meaning) of these reasons: src/api/reasons.ts's. */
export const SERVING_REASONS = {
  Live: CUSTOM_DOMAIN_REASONS.Live,
  CertificateNotServed: CUSTOM_DOMAIN_REASONS.CertificateNotServed,
  ProjectNotReached: CUSTOM_DOMAIN_REASONS.ProjectNotReached,
  DataPlaneUnreachable: CUSTOM_DOMAIN_REASONS.DataPlaneUnreachable,
} as const satisfies Record<ServingReason, ReasonEntry>;

/** The Host (and SNI, for the default certificate) no route can match: RFC 6761 §6.4. */
export const UNROUTED_HOSTNAME = 'portico-serving-check.invalid';

/** The facts of a served certificate, as the on-call engineer needs them. */
export interface ServedCertificate {
  /** Uppercase hex without leading zeros or colons (normalizeSerial). */
  serialNumber: string;
  /** Distinguished name, one line (`CN=…, O=…`). */
  subject: string;
  /** Distinguished name, one line. */
  issuer: string;
  /** RFC 3339. */
  notAfter: string;
  /** The dNSName entries of the subjectAltName extension. */
  dnsNames: string[];
  /** SHA-256 fingerprint (`AB:CD:…`), to tell two certificates apart. */
  fingerprint256: string;
  /** True when the certificate names the hostname checked (RFC 6125 matching, node:crypto checkHost). */
  coversHostname: boolean;
}

/** An HTTP answer, reduced to what is compared and shown. */
export interface ObservedResponse {
  statusCode: number;
  /** The `server`, `content-type` and `location` headers and the `projectHeader`, when present; lowercase names. */
  headers: Record<string, string>;
  /** SHA-256 of the body's first `maxBodyBytes` bytes, hex. */
  bodyDigest: string;
  /** The body's first 80 characters, control characters replaced by spaces, trimmed. */
  bodyPreview: string;
}

/** A failure to connect or to get an answer. */
export interface ObservedError {
  /** Node's error code (`ECONNREFUSED`, `ETIMEDOUT`, `ERR_SSL_…`), or `ERROR` when it has none. */
  code: string;
  message: string;
}

/** A header the platform's backends add to every answer (optional: see the module comment). */
export interface ProjectHeader {
  /** Header name, any case. */
  name: string;
  /** The value required; undefined accepts any value. */
  value?: string;
}

/** What the check is asked to confirm. */
export interface ServingExpectation {
  /** The data plane's address as configured (`host:port`), for messages. */
  address: string;
  /** The data plane's name for messages, e.g. `Traefik` (`--data-plane-name`); default "the data plane". */
  dataPlaneName?: string;
  hostname: string;
  /**
   * The serial of the certificate Portico issued (status.certificate.serialNumber); any hex form.
   * Run the check only for a domain with a certificate: an empty serial matches no certificate.
   */
  serialNumber: string;
  /** The serial of the certificate it replaced, when known: named as such when still served. */
  previousSerialNumber?: string;
  projectHeader?: ProjectHeader;
  /** The path requested; default `/`. */
  path?: string;
  /**
   * For a redirect domain, the origin its spec redirects to (`https://<to>`, routing/redirect.ts
   * `targetOrigin`): the answer must be a redirect (3xx with a Location) to that origin. Undefined
   * for a serving domain.
   */
  redirectOrigin?: string;
  /**
   * The origin this hostname redirected to under its previous spec, until a check has seen the
   * current spec's route (a redirect domain turned into a serving one, as the new primary of a
   * project's switch): an answer that is still that redirect is the earlier route, not this one.
   */
  previousRedirectOrigin?: string;
}

/** What serving-check.ts observed; each later step only when the earlier one got an answer. */
export type ServingObservation =
  | { step: 'tls'; error: ObservedError }
  | {
      step: 'certificate';
      certificate: ServedCertificate;
      /** The certificate served for SNI = UNROUTED_HOSTNAME, or the error that got instead. */
      defaultCertificate: ServedCertificate | ObservedError;
    }
  | { step: 'http'; certificate: ServedCertificate; error: ObservedError }
  | {
      step: 'done';
      certificate: ServedCertificate;
      response: ObservedResponse;
      /** The answer for Host = UNROUTED_HOSTNAME, or the error that got instead. */
      defaultResponse: ObservedResponse | ObservedError;
    };

interface VerdictBase {
  reason: ServingReason;
  /** One or more sentences for the Ready condition: what was served, and what to do. */
  message: string;
}

export type ServingVerdict =
  | (VerdictBase & {
      result: 'serving';
      reason: 'Live';
      certificate: ServedCertificate;
      response: ObservedResponse;
      /** False when there was no default answer to compare with (see the module comment). */
      compared: boolean;
      /**
       * What was served where: `<hostname>: served certificate <serial> (valid until <RFC 3339>) at
       * <address>`. `message` is `<served>: <answer>`; Ready's message puts the time of the check
       * between them (schedule.ts `servingReadiness`).
       */
      served: string;
      /**
       * The answer: `GET https://<hostname><path> answered HTTP <status>`, with `, Location <url>` for
       * a redirect and a note when it was not compared with the default backend; a full sentence.
       */
      answer: string;
    })
  | (VerdictBase & {
      result: 'wrong-certificate';
      reason: 'CertificateNotServed';
      certificate: ServedCertificate;
      /** What the served certificate is: the data plane's default, the previous one, or another. */
      kind: 'default' | 'previous' | 'other';
    })
  | (VerdictBase & {
      result: 'not-reaching-project';
      reason: 'ProjectNotReached';
      certificate: ServedCertificate;
      response: ObservedResponse;
    })
  | (VerdictBase & {
      result: 'unreachable';
      reason: 'DataPlaneUnreachable';
      step: 'tls' | 'http';
      error: ObservedError;
    });

export type ServingResult = ServingVerdict['result'];

/** The verdict of a check that found the domain served. */
export type ServingSuccess = Extract<ServingVerdict, { result: 'serving' }>;

/**
 * A serial number as Portico compares it: uppercase hex, without `:` separators, whitespace or
 * leading zeros (node:crypto prints `0A…`, openssl `0a:…`, status fields uppercase). `''` for zero.
 */
export function normalizeSerial(serial: string): string {
  return serial.replace(/[\s:]/g, '').toUpperCase().replace(/^0+/, '');
}

/** The facts of `cert` (node:crypto's parsed certificate) served when `hostname` was asked for. */
export function servedCertificate(cert: X509Certificate, hostname: string): ServedCertificate {
  const dnsNames = subjectAltDnsNames(cert);
  return {
    serialNumber: normalizeSerial(cert.serialNumber),
    subject: oneLine(cert.subject),
    issuer: oneLine(cert.issuer),
    notAfter: new Date(cert.validToDate).toISOString(),
    dnsNames,
    fingerprint256: cert.fingerprint256,
    coversHostname: cert.checkHost(hostname) !== undefined,
  };
}

/** A distinguished name on one line; `''` for an empty one (node:crypto gives undefined: Pebble's leaves have none). */
function oneLine(dn: string | undefined): string {
  return (dn ?? '').split('\n').filter(Boolean).join(', ');
}

function isError(value: object): value is ObservedError {
  return 'code' in value && 'message' in value && !('statusCode' in value);
}

/** The verdict on `observation`, with its reason and message. Pure. */
export function judgeServing(expected: ServingExpectation, observation: ServingObservation): ServingVerdict {
  switch (observation.step) {
    case 'tls':
    case 'http':
      return unreachable(expected, observation.step, observation.error);
    case 'certificate':
      return wrongCertificate(expected, observation.certificate, observation.defaultCertificate);
    case 'done':
      return judgeResponse(
        expected,
        observation.certificate,
        observation.response,
        observation.defaultResponse,
      );
  }
}

/** Whether `certificate` is the one expected (the serial decides; the caller checks it first). */
export function isExpectedCertificate(expected: ServingExpectation, certificate: ServedCertificate): boolean {
  const want = normalizeSerial(expected.serialNumber);
  return want !== '' && certificate.serialNumber === want;
}

const ERROR_HINTS: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there',
  ETIMEDOUT: 'no answer within the timeout',
  ECONNRESET: 'the connection was closed',
  ENOTFOUND: 'the name does not resolve',
  EAI_AGAIN: 'the name did not resolve (temporary failure)',
  EHOSTUNREACH: 'no route to the host',
  ENETUNREACH: 'the network is unreachable',
  ERR_SSL_TLSV1_UNRECOGNIZED_NAME:
    'the data plane refused the TLS handshake for this SNI name (it serves no certificate for it)',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the port does not speak TLS (a plain HTTP port?)',
  EPROTO: 'the TLS handshake failed',
};

function unreachable(
  expected: ServingExpectation,
  step: 'tls' | 'http',
  error: ObservedError,
): ServingVerdict {
  const hint =
    step === 'tls' && error.code === 'ECONNRESET'
      ? 'the connection was closed during the TLS handshake, as a data plane does that refuses SNI names it has no certificate or listener for'
      : ERROR_HINTS[error.code];
  const plane = expected.dataPlaneName ?? 'the data plane';
  const what =
    step === 'tls'
      ? `no TLS connection to ${plane} at ${expected.address} for ${expected.hostname}`
      : `${plane} at ${expected.address} served the certificate but gave no HTTP answer for ${expected.hostname}`;
  return {
    result: 'unreachable',
    reason: 'DataPlaneUnreachable',
    step,
    error,
    message:
      `The serving check got ${what}: ${error.code}${hint ? ` (${hint})` : ''}. ` +
      `Check the address (--serving-check-address) and that ${expected.dataPlaneName ?? 'the ingress controller'} runs; the check is retried.`,
  };
}

/** `CN=…, issuer …, serial …, valid until …` of a served certificate, for messages. */
export function describeCertificate(certificate: ServedCertificate, hostname: string): string {
  const selfSigned = certificate.subject === certificate.issuer;
  const issuer = selfSigned ? 'self-signed' : `issuer ${certificate.issuer || '(empty)'}`;
  const names = certificate.coversHostname ? '' : `, not valid for ${hostname}`;
  return `subject ${certificate.subject || '(empty)'}, ${issuer}, serial ${certificate.serialNumber}, valid until ${certificate.notAfter}${names}`;
}

function wrongCertificate(
  expected: ServingExpectation,
  certificate: ServedCertificate,
  defaultCertificate: ServedCertificate | ObservedError,
): ServingVerdict {
  const previous =
    expected.previousSerialNumber !== undefined &&
    normalizeSerial(expected.previousSerialNumber) === certificate.serialNumber;
  const isDefault =
    !isError(defaultCertificate) && defaultCertificate.fingerprint256 === certificate.fingerprint256;
  const kind = previous ? 'previous' : isDefault ? 'default' : 'other';
  const described = describeCertificate(certificate, expected.hostname);
  const served = {
    previous: `the certificate the renewal replaced (${described})`,
    default: `its default certificate, the one it serves for hostnames it has no certificate for (${described})`,
    other: `another certificate (${described})`,
  }[kind];
  const fix = {
    previous: 'The ingress controller has not loaded the renewed Secret yet; the check is repeated.',
    default:
      "The ingress controller does not use the domain's Secret for this hostname: it has not loaded it yet, or does not serve the domain's Ingress (class, controller logs).",
    other:
      'Another Ingress or listener claims this hostname with its own certificate, or the address is not the ingress controller that serves the domain.',
  }[kind];
  return {
    result: 'wrong-certificate',
    reason: 'CertificateNotServed',
    certificate,
    kind,
    message:
      `For ${expected.hostname}, ${expected.dataPlaneName ?? 'the data plane'} at ${expected.address} serves ${served}, ` +
      `not the certificate Portico issued (serial ${normalizeSerial(expected.serialNumber)}). ${fix}`,
  };
}

function describeResponse(response: ObservedResponse): string {
  const headers = Object.entries(response.headers).map(([name, value]) => `${name}: ${value}`);
  const body = response.bodyPreview === '' ? 'an empty body' : `body "${response.bodyPreview}"`;
  return `HTTP ${response.statusCode} (${[...headers, body].join(', ')})`;
}

function headerMismatch(header: ProjectHeader | undefined, response: ObservedResponse): string | undefined {
  if (!header) return undefined;
  const seen = response.headers[header.name.toLowerCase()];
  if (seen === undefined) return `it lacks the header ${header.name} the project's answers carry`;
  if (header.value !== undefined && seen !== header.value)
    return `its header ${header.name} is "${seen}", not "${header.value}"`;
  return undefined;
}

/** The origin (`https://host[:port]`) of a redirect answer's Location, or undefined: not a redirect. */
function redirectedTo(response: ObservedResponse): string | undefined {
  const location = response.headers['location'];
  if (location === undefined || response.statusCode < 300 || response.statusCode > 399) return undefined;
  try {
    return new URL(location).origin;
  } catch {
    return undefined;
  }
}

/**
 * Why `response` is not the answer of the domain's current spec (`redirectOrigin`,
 * `previousRedirectOrigin`), as a clause; undefined when it may be. A redirect domain's answer is
 * its redirect (RFC 9110 §15.4: a 3xx whose Location is on the target's origin); a serving
 * domain's answer may be anything the project sends, but the redirect the hostname had before.
 */
function earlierRoute(expected: ServingExpectation, response: ObservedResponse): string | undefined {
  const to = redirectedTo(response);
  if (expected.redirectOrigin !== undefined) {
    if (to === expected.redirectOrigin) return undefined;
    return `not the redirect to ${expected.redirectOrigin} the domain's spec asks for`;
  }
  if (expected.previousRedirectOrigin !== undefined && to === expected.previousRedirectOrigin)
    return `the redirect to ${expected.previousRedirectOrigin} the domain had before its spec changed to serve the project`;
  return undefined;
}

function isDefaultAnswer(
  response: ObservedResponse,
  defaultResponse: ObservedResponse | ObservedError,
): boolean {
  if (isError(defaultResponse) || defaultResponse.statusCode === 421) return false;
  return (
    defaultResponse.statusCode === response.statusCode && defaultResponse.bodyDigest === response.bodyDigest
  );
}

/** The `not-reaching-project` verdict with `message`. */
function notReaching(
  certificate: ServedCertificate,
  response: ObservedResponse,
  message: string,
): ServingVerdict {
  return { result: 'not-reaching-project', reason: 'ProjectNotReached', certificate, response, message };
}

function judgeResponse(
  expected: ServingExpectation,
  certificate: ServedCertificate,
  response: ObservedResponse,
  defaultResponse: ObservedResponse | ObservedError,
): ServingVerdict {
  if (!isExpectedCertificate(expected, certificate))
    return wrongCertificate(expected, certificate, { code: 'ERROR', message: 'not probed' });
  const answer = `https://${expected.hostname}${expected.path ?? '/'} answers ${describeResponse(response)}`;
  if (isDefaultAnswer(response, defaultResponse)) {
    return notReaching(
      certificate,
      response,
      `The certificate Portico issued is served, but ${answer}, the same as the data plane's default backend answers a hostname it has no route for: ` +
        "the domain's route is not in effect. Check that the ingress controller took the domain's Ingress or HTTPRoute (its class, the controller's logs).",
    );
  }
  const earlier = earlierRoute(expected, response);
  if (earlier !== undefined) {
    return notReaching(
      certificate,
      response,
      `The certificate Portico issued is served, but ${answer}, ${earlier}: ${expected.dataPlaneName ?? 'the data plane'} ` +
        "does not answer with the domain's current route yet (it has not loaded the change of the domain's spec, or another route answers). The check is repeated.",
    );
  }
  const mismatch = headerMismatch(expected.projectHeader, response);
  if (mismatch !== undefined) {
    return notReaching(
      certificate,
      response,
      `The certificate Portico issued is served, but ${answer}, and ${mismatch}: the request does not reach the project.`,
    );
  }
  const compared = !isError(defaultResponse) && defaultResponse.statusCode !== 421;
  const note = compared
    ? ''
    : ` (not compared with the default backend: ${isError(defaultResponse) ? defaultResponse.code : 'HTTP 421'} for a hostname without a route)`;
  const location = response.headers['location'];
  const served = `${expected.hostname}: served certificate ${certificate.serialNumber} (valid until ${certificate.notAfter}) at ${expected.address}`;
  const answered = `GET https://${expected.hostname}${expected.path ?? '/'} answered HTTP ${response.statusCode}${location === undefined ? '' : `, Location ${location}`}${note}.`;
  return {
    result: 'serving',
    reason: 'Live',
    certificate,
    response,
    compared,
    served,
    answer: answered,
    message: `${served}: ${answered}`,
  };
}

/**
 * Ready's message for a serving verdict checked at `checked` (a phrase, e.g. `checked
 * 2026-11-29T03:00:00.000Z`): `<hostname>: served certificate <serial> (valid until …) at <address>,
 * <checked>: GET https://<hostname>/ answered HTTP <status>[, Location <url>].` It names only what the
 * check saw (docs/customdomains.md, Ready).
 */
export function servedMessage(verdict: Pick<ServingSuccess, 'served' | 'answer'>, checked: string): string {
  return `${verdict.served}, ${checked}: ${verdict.answer}`;
}
