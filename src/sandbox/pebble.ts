/**
 * Pebble, Let's Encrypt's test ACME CA. Its directory and management API are HTTPS with a serving
 * certificate from the sandbox's Pebble listener CA; clients trust that CA through `ACME_CA_BUNDLE`.
 * It validates HTTP-01 challenges by connecting to `httpPort` on the address the sandbox's DNS
 * server gives for the name: the operator's challenge server.
 */
import { writeFile } from 'node:fs/promises';

import { CERT_FILES } from './certificates.js';
import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { httpProbe, waitUntilReady } from './readiness.js';

export const PEBBLE = 'pebble';

/** Validity of the certificates Pebble issues, in seconds: 90 days, like Let's Encrypt's default. */
export const CERTIFICATE_VALIDITY_SECONDS = 90 * 24 * 60 * 60;
/** The CAA issuer-domain of the sandbox's CA (Pebble's default). */
export const PEBBLE_CAA_IDENTITY = 'pebble.letsencrypt.org';

/** A certificate profile Pebble offers (draft-ietf-acme-profiles), as in its config's `profiles`. */
export interface PebbleProfile {
  /** What the directory's `meta.profiles` says about it. */
  readonly description: string;
  /** How long certificates issued under this profile are valid, in seconds. */
  readonly validityPeriod: number;
}

/**
 * The sandbox's profiles: one only, because Pebble picks a random profile for an order that names
 * none, and every certificate of the sandbox should last 90 days.
 */
export const SANDBOX_PEBBLE_PROFILES: Readonly<Record<string, PebbleProfile>> = {
  default: {
    description: "90-day certificates, like Let's Encrypt's classic profile",
    validityPeriod: CERTIFICATE_VALIDITY_SECONDS,
  },
};

/** Where Pebble listens and where it validates challenges. */
export interface PebbleOptions {
  /** The ACME API (directory at `/dir`). */
  readonly listenPort: number;
  /** The management API (`/roots/0`, `/intermediates/0`, ...). */
  readonly managementPort: number;
  /** The port HTTP-01 validation connects to: the operator's challenge server. */
  readonly httpPort: number;
  /** The port TLS-ALPN-01 validation connects to (unused by the operator, but Pebble wants one). */
  readonly tlsPort: number;
  /** The DNS server Pebble resolves with, `127.0.0.1:<port>`. */
  readonly dnsServer: string;
  /**
   * The profiles offered, by name (default `SANDBOX_PEBBLE_PROFILES`). With more than one, an order
   * that names no profile gets a random one.
   */
  readonly profiles?: Readonly<Record<string, PebbleProfile>>;
  /**
   * External account binding (RFC 8555 §7.3.4): when given, every newAccount must carry a binding
   * made with one of these HMAC keys (key id → key, base64url), as CAs such as ZeroSSL require.
   * Absent: no binding is asked for (the sandbox's own Pebble).
   */
  readonly externalAccountMacKeys?: Readonly<Record<string, string>>;
}

/**
 * The sandbox's external account binding key for a Pebble that requires one: the key id and its
 * HMAC key (base64url of 32 fixed bytes; a test key, not a secret).
 */
export const SANDBOX_EAB_KEY = {
  keyId: 'portico-sandbox-eab',
  hmacKey: Buffer.from('portico sandbox eab hmac key 32b!').toString('base64url'),
} as const;

/**
 * Which Pebble process: its component name (log and pid files) and its config file. The sandbox's
 * own is `pebble` with `<dir>/pebble.json`; tests may run a second one beside it under another name.
 */
export interface PebbleInstance {
  readonly name: string;
  /** Absolute path of the JSON config file written before the start. */
  readonly configPath: string;
}

/** The content of `<dir>/pebble.json` (keys as in Pebble v2.10's test/config/pebble-config.json). */
export function pebbleConfig(paths: SandboxPaths, options: PebbleOptions): unknown {
  return {
    pebble: {
      listenAddress: `127.0.0.1:${options.listenPort}`,
      managementListenAddress: `127.0.0.1:${options.managementPort}`,
      certificate: paths.cert(CERT_FILES.pebbleCert),
      privateKey: paths.cert(CERT_FILES.pebbleKey),
      httpPort: options.httpPort,
      tlsPort: options.tlsPort,
      ocspResponderURL: '',
      externalAccountBindingRequired: options.externalAccountMacKeys !== undefined,
      ...(options.externalAccountMacKeys ? { externalAccountMACKeys: options.externalAccountMacKeys } : {}),
      // What the directory's meta.caaIdentities lists: the issuer-domain a CAA record must name.
      caaIdentities: [PEBBLE_CAA_IDENTITY],
      keyAlgorithm: 'ecdsa',
      // Retry-After (seconds) on pending authorizations and orders: short, for fast tests.
      retryAfter: { authz: 1, order: 1 },
      profiles: options.profiles ?? SANDBOX_PEBBLE_PROFILES,
    },
  };
}

/** Pebble's command-line flags; `configPath` defaults to `<dir>/pebble.json`. */
export function pebbleArgs(
  paths: SandboxPaths,
  options: PebbleOptions,
  configPath: string = paths.pebbleConfig,
): string[] {
  return ['-config', configPath, '-dnsserver', options.dnsServer];
}

/**
 * Environment of the Pebble process: no random sleeps before validation, and no random rejection of
 * valid nonces (Pebble's defaults exercise client retries; the sandbox wants speed and determinism).
 */
export const PEBBLE_ENV: Readonly<Record<string, string>> = {
  PEBBLE_VA_NOSLEEP: '1',
  PEBBLE_WFE_NONCEREJECT: '0',
};

/**
 * Writes `<dir>/pebble.json`, starts Pebble and waits until its directory answers 200.
 *
 * @param binary absolute path of the pebble binary
 * @param caPem the Pebble listener CA (trusted for the readiness probe)
 * @param instance the process name and config file (default: the sandbox's own Pebble)
 * @returns the process and the directory URL
 * @throws ComponentStartError when Pebble exits or does not answer within 30 s
 */
export async function startPebble(
  paths: SandboxPaths,
  binary: string,
  caPem: string,
  options: PebbleOptions,
  instance: PebbleInstance = { name: PEBBLE, configPath: paths.pebbleConfig },
): Promise<{ process: StartedProcess; directoryUrl: string; managementUrl: string }> {
  await writeFile(instance.configPath, `${JSON.stringify(pebbleConfig(paths, options), null, 2)}\n`);
  const proc = await startDetached(paths, {
    name: instance.name,
    command: binary,
    args: pebbleArgs(paths, options, instance.configPath),
    env: PEBBLE_ENV,
  });
  const directoryUrl = `https://127.0.0.1:${options.listenPort}/dir`;
  await waitUntilReady(proc, httpProbe(directoryUrl, { ca: caPem }), { timeoutMs: 30_000, intervalMs: 100 });
  return { process: proc, directoryUrl, managementUrl: `https://127.0.0.1:${options.managementPort}` };
}
