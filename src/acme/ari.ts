/**
 * ACME Renewal Information (RFC 9773): the CA's suggested renewal window for a certificate.
 *
 * - §4.1: the certificate identifier is base64url(AKI keyIdentifier) "." base64url(serial number
 *   DER value octets), both without padding.
 * - §4.2: the client renews at a time chosen uniformly at random within the suggested window, and
 *   polls again after the Retry-After the CA sends (clamped here to [1 min, 6 h]).
 * - §5: the renewal order names the old certificate's identifier in `replaces`.
 */
import 'reflect-metadata';
import { AuthorityKeyIdentifierExtension, X509Certificate as PeculiarCertificate } from '@peculiar/x509';
import { recordAcmeRequest } from '../observability/shared-metrics.js';
import { observedFetch } from './request-metrics.js';

/** Thrown when a certificate lacks what an ARI identifier needs, or the CA's answer is unusable. */
export class AriError extends Error {
  readonly code = 'ARI_ERROR';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AriError';
  }
}

export interface RenewalWindow {
  /** RFC 3339. */
  start: string;
  /** RFC 3339. */
  end: string;
  explanationURL?: string;
  /** Seconds until the CA wants to be asked again (Retry-After), clamped to [60, 21600]. */
  retryAfterSeconds: number;
}

function base64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/** The serial number's DER value octets: the hex with a leading zero octet when the top bit is set. */
export function serialValueOctets(serialHex: string): Uint8Array {
  const even = serialHex.length % 2 ? `0${serialHex}` : serialHex;
  const bytes = Buffer.from(even, 'hex');
  return (bytes[0] ?? 0) >= 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes;
}

/** The ARI certificate identifier of the leaf in `certificatePem` (§4.1). Throws `AriError`. */
export function ariCertificateId(certificatePem: string): string {
  const cert = new PeculiarCertificate(certificatePem);
  const aki = cert.getExtension(AuthorityKeyIdentifierExtension);
  if (!aki?.keyId)
    throw new AriError('the certificate has no Authority Key Identifier, so ARI cannot name it');
  return `${base64url(Buffer.from(aki.keyId, 'hex'))}.${base64url(serialValueOctets(cert.serialNumber))}`;
}

/**
 * A renewal time uniformly at random within the window (§4.2); a window already past gives `now`.
 * Pure: `random` returns [0, 1).
 */
export function selectRenewalTime(
  window: Pick<RenewalWindow, 'start' | 'end'>,
  now: Date,
  random: () => number,
): Date {
  const start = Date.parse(window.start);
  const end = Date.parse(window.end);
  if (end <= now.getTime()) return now;
  const from = Math.max(start, now.getTime());
  return new Date(from + Math.floor(random() * (end - from)));
}

function clampRetryAfter(header: string | null): number {
  const seconds = Number(header);
  if (!Number.isFinite(seconds) || seconds <= 0) return 21_600;
  return Math.min(21_600, Math.max(60, Math.round(seconds)));
}

/** Reads the renewalInfo resource for `certId` (§4.2). Throws `AriError` on HTTP or format errors. */
export async function fetchRenewalWindow(renewalInfoUrl: string, certId: string): Promise<RenewalWindow> {
  const url = `${renewalInfoUrl.replace(/\/$/, '')}/${certId}`;
  let response: Response;
  try {
    response = await observedFetch(
      'renewalInfo',
      url,
      { headers: { 'user-agent': 'portico' }, signal: AbortSignal.timeout(10_000) },
      recordAcmeRequest,
    );
  } catch (err) {
    throw new AriError(`GET ${url} failed: ${(err as Error).message}`, { cause: err });
  }
  if (!response.ok) throw new AriError(`GET ${url} answered HTTP ${response.status}`);
  const body = (await response.json()) as {
    suggestedWindow?: { start?: unknown; end?: unknown };
    explanationURL?: unknown;
  };
  const start = body.suggestedWindow?.start;
  const end = body.suggestedWindow?.end;
  if (typeof start !== 'string' || typeof end !== 'string' || !(Date.parse(start) < Date.parse(end))) {
    throw new AriError(`GET ${url} gave no valid suggestedWindow`);
  }
  return {
    start: new Date(start).toISOString(),
    end: new Date(end).toISOString(),
    ...(typeof body.explanationURL === 'string' ? { explanationURL: body.explanationURL } : {}),
    retryAfterSeconds: clampRetryAfter(response.headers.get('retry-after')),
  };
}
