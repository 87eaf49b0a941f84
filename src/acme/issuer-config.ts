/**
 * The ACME issuers the controller orders from, in order (docs/install.md, "Several ACME issuers"):
 * `--acme-issuers` (`PORTICO_ACME_ISSUERS`, the chart's `acme.issuers`) holds a YAML or JSON list;
 * without it the single-issuer flags (`--acme-directory-url`, `--acme-eab-kid`, ...) make a list of
 * one issuer named `default`, as before. Pure: parses and checks, reads no file and no Secret.
 *
 * Each entry:
 *
 *   - name: letsencrypt                 # lower-case DNS label, unique; the `ca` metric label and
 *                                       # status.certificate.acmeIssuer
 *     directoryUrl: https://acme-v02.api.letsencrypt.org/directory
 *     email: ops@example.com            # default --acme-email
 *     externalAccountBinding:           # RFC 8555 §7.3.4, for CAs that require it
 *       keyId: kid-1
 *       hmacKeySecretRef: {name: portico-acme-eab, key: hmac-key}   # Secret in the operator's namespace
 *     profile: classic                  # draft-ietf-acme-profiles; default: the CA chooses
 *     caaIdentities: [letsencrypt.org]  # default: the directory's meta.caaIdentities
 *     caBundleFile: /etc/portico/acme-ca/zerossl/ca.crt   # extra CA certificates to trust for it
 *     accountSecretName: portico-acme-account   # default: the first --acme-account-secret, the
 *                                               # others <--acme-account-secret>-<name>
 *     orderBudget: {orders: 300, windowSeconds: 10800, maxInFlight: 50}   # default: the --acme-* flags
 */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/** The issuer name of the list the single-issuer flags make. */
export const DEFAULT_ISSUER_NAME = 'default';

/** The order budget of one issuer's account (order-budget.ts). */
export interface IssuerOrderBudget {
  /** New orders per window; positive integer. */
  readonly orders: number;
  /** The sliding window, milliseconds. */
  readonly windowMs: number;
  /** Orders in progress at once; positive integer. */
  readonly maxInFlight: number;
}

/** Where the EAB HMAC key comes from: given (the single-issuer flag) or a key of a Secret. */
export type HmacKeySource =
  { readonly value: string } | { readonly secretRef: { readonly name: string; readonly key: string } };

/** One ACME issuer, checked and with its defaults filled in. */
export interface AcmeIssuerSettings {
  readonly name: string;
  readonly directoryUrl: string;
  readonly email?: string;
  /** External account binding (RFC 8555 §7.3.4). */
  readonly externalAccountBinding?: { readonly keyId: string; readonly hmacKey: HmacKeySource };
  readonly profile?: string;
  /** [] means the directory's `meta.caaIdentities`. */
  readonly caaIdentities: readonly string[];
  /** A PEM file of extra CA certificates to trust for this CA's HTTPS. */
  readonly caBundleFile?: string;
  /** The Secret, in the operator's namespace, that holds this CA's account key. */
  readonly accountSecretName: string;
  readonly orderBudget: IssuerOrderBudget;
}

/** Thrown for a bad issuer list; the message names the entry and the field. */
export class IssuerConfigError extends Error {
  readonly code = 'ISSUER_CONFIG_ERROR';
  constructor(message: string) {
    super(message);
    this.name = 'IssuerConfigError';
  }
}

const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const positiveInt = z.number().int().positive();

const issuerSchema = z.strictObject({
  name: z.string().regex(LABEL, 'must be a lower-case DNS label (a-z, 0-9, -; at most 63)'),
  directoryUrl: z.string().regex(/^https?:\/\/\S+$/, 'must be an http(s) URL'),
  email: z.string().min(1).optional(),
  externalAccountBinding: z
    .strictObject({
      keyId: z.string().optional(),
      hmacKeySecretRef: z
        .strictObject({ name: z.string().optional(), key: z.string().optional() })
        .optional(),
    })
    .optional(),
  profile: z.string().optional(),
  caaIdentities: z.array(z.string().min(1)).optional(),
  caBundleFile: z.string().optional(),
  accountSecretName: z
    .string()
    .regex(/^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/, 'must be a Secret name')
    .optional(),
  orderBudget: z
    .strictObject({
      orders: positiveInt.optional(),
      windowSeconds: positiveInt.optional(),
      maxInFlight: positiveInt.optional(),
    })
    .optional(),
});

/** What the single-issuer flags and the defaults give. */
export interface IssuerDefaults {
  readonly email?: string;
  /** `--acme-account-secret`: the first issuer's account Secret, and the others' prefix. */
  readonly accountSecretName: string;
  readonly orderBudget: IssuerOrderBudget;
}

/** The single-issuer flags, as a list of one issuer named `default` (the settings before lists). */
export function singleIssuer(
  flags: {
    directoryUrl: string;
    eab?: { keyId: string; hmacKey: string } | undefined;
    profile?: string | undefined;
    caaIdentities: readonly string[];
  },
  defaults: IssuerDefaults,
): AcmeIssuerSettings[] {
  return [
    {
      name: DEFAULT_ISSUER_NAME,
      directoryUrl: flags.directoryUrl,
      ...(defaults.email ? { email: defaults.email } : {}),
      ...(flags.eab
        ? { externalAccountBinding: { keyId: flags.eab.keyId, hmacKey: { value: flags.eab.hmacKey } } }
        : {}),
      ...(flags.profile ? { profile: flags.profile } : {}),
      caaIdentities: flags.caaIdentities,
      accountSecretName: defaults.accountSecretName,
      orderBudget: defaults.orderBudget,
    },
  ];
}

/**
 * Parses `--acme-issuers`: a YAML (or JSON) list of issuers, in the order orders go to them.
 *
 * @throws IssuerConfigError for text that is not YAML, an empty list, an unknown or bad field
 *   (naming `acme.issuers[i] (name)` and the field), a duplicate name, or an EAB key id without its
 *   HMAC Secret (or the other way round)
 */
export function parseIssuers(text: string, defaults: IssuerDefaults): AcmeIssuerSettings[] {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new IssuerConfigError(`--acme-issuers is not YAML or JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(raw) || raw.length === 0)
    throw new IssuerConfigError('--acme-issuers must be a list of at least one issuer');
  const seen = new Set<string>();
  return raw.map((entry: unknown, index) => {
    const where = `acme.issuers[${index}]${nameOf(entry)}`;
    const parsed = issuerSchema.safeParse(entry);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.join('.') ?? '';
      throw new IssuerConfigError(`${where}${field ? `.${field}` : ''}: ${issue?.message ?? 'invalid'}`);
    }
    if (seen.has(parsed.data.name))
      throw new IssuerConfigError(`${where}: the name "${parsed.data.name}" is used twice`);
    seen.add(parsed.data.name);
    return settingsOf(parsed.data, index, where, defaults);
  });
}

/** One parsed entry with its defaults filled in. */
function settingsOf(
  issuer: z.infer<typeof issuerSchema>,
  index: number,
  where: string,
  defaults: IssuerDefaults,
): AcmeIssuerSettings {
  const eab = bindingOf(issuer.externalAccountBinding, where);
  const budget = issuer.orderBudget;
  const email = issuer.email ?? defaults.email;
  return {
    name: issuer.name,
    directoryUrl: issuer.directoryUrl,
    ...(email ? { email } : {}),
    ...(eab ? { externalAccountBinding: eab } : {}),
    ...(issuer.profile ? { profile: issuer.profile } : {}),
    caaIdentities: issuer.caaIdentities ?? [],
    ...(issuer.caBundleFile ? { caBundleFile: issuer.caBundleFile } : {}),
    accountSecretName:
      issuer.accountSecretName ??
      (index === 0 ? defaults.accountSecretName : `${defaults.accountSecretName}-${issuer.name}`),
    orderBudget: {
      orders: budget?.orders ?? defaults.orderBudget.orders,
      windowMs:
        budget?.windowSeconds !== undefined ? budget.windowSeconds * 1000 : defaults.orderBudget.windowMs,
      maxInFlight: budget?.maxInFlight ?? defaults.orderBudget.maxInFlight,
    },
  };
}

function nameOf(entry: unknown): string {
  const name = (entry as { name?: unknown } | null)?.name;
  return typeof name === 'string' && name !== '' ? ` (${name})` : '';
}

/** The binding of an entry: both the key id and the HMAC Secret, or neither (empty strings are unset). */
function bindingOf(
  eab:
    | {
        keyId?: string | undefined;
        hmacKeySecretRef?: { name?: string | undefined; key?: string | undefined } | undefined;
      }
    | undefined,
  where: string,
): AcmeIssuerSettings['externalAccountBinding'] {
  const keyId = eab?.keyId || undefined;
  const secretName = eab?.hmacKeySecretRef?.name || undefined;
  if (keyId && !secretName)
    throw new IssuerConfigError(
      `${where}.externalAccountBinding: keyId is set but hmacKeySecretRef.name is not (the Secret that holds the CA's HMAC key)`,
    );
  if (!keyId && secretName)
    throw new IssuerConfigError(
      `${where}.externalAccountBinding: hmacKeySecretRef is set but keyId is not (the key id the CA gave with the HMAC key)`,
    );
  if (!keyId || !secretName) return undefined;
  return {
    keyId,
    hmacKey: { secretRef: { name: secretName, key: eab?.hmacKeySecretRef?.key || 'hmac-key' } },
  };
}
