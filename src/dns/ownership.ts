/**
 * Ownership verification by a TXT record (docs/customdomains.md, "Ownership verification"). Pure: no I/O; the clock and the
 * key are inputs.
 *
 * A CNAME to the platform proves only that a hostname points at the platform, not who owns it: a
 * customer who removes their domain and leaves the CNAME (a dangling record) would let any other
 * tenant claim it. So, where the policy asks for it, the claimant must also publish
 *
 *     _portico-challenge.<hostname>  TXT  "portico-verification=<token>"
 *
 * (the underscore label keeps the record out of the hostname's own namespace, RFC 8552; the same
 * shape as ACME's `_acme-challenge`, RFC 8555 §8.4). The token is an HMAC-SHA256 (RFC 2104) of the
 * CustomDomain's uid and hostname, keyed by a secret only the operator reads: stable for the
 * object's life, different for every CustomDomain (a re-created one gets a new uid, so a token left
 * in DNS by a former holder never verifies a new claimant), and impossible to compute from public
 * data (the uid is not a secret, the key is).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { RequiredDnsRecord } from '../api/customdomain.js';
import type { RRsetAnswer } from './answers.js';
import { INSTRUCTED_TTL_SECONDS, registeredDomain, relativeName } from './records.js';
import { PROPAGATION_NOTE, type Verdict } from './verdict.js';

/** The label prepended to the hostname to name the ownership record. */
export const OWNERSHIP_RECORD_LABEL = '_portico-challenge';
/** What the TXT record's value starts with, before the token. */
export const OWNERSHIP_VALUE_PREFIX = 'portico-verification=';
/** Minimum length of the key, in bytes (the HMAC's output size, RFC 2104 §3). */
export const OWNERSHIP_KEY_MIN_BYTES = 32;

/** `--ownership-verification`: when a claimant must show the TXT record. */
export type OwnershipPolicy = 'always' | 'recently-claimed' | 'never';
export const OWNERSHIP_POLICIES: readonly OwnershipPolicy[] = ['always', 'recently-claimed', 'never'];

/** The owner name of the ownership record: `_portico-challenge.<hostname>`. */
export function ownershipRecordName(hostname: string): string {
  return `${OWNERSHIP_RECORD_LABEL}.${hostname}`;
}

/**
 * The token of one CustomDomain: base64url of HMAC-SHA256(key, `<uid>\n<hostname>`), 43 characters.
 *
 * @param key the operator's secret key, at least 32 bytes
 * @param uid the CustomDomain's metadata.uid
 * @param hostname its normalized hostname
 * @throws RangeError when the key is shorter than 32 bytes or the uid is empty
 */
export function ownershipToken(key: Uint8Array, uid: string, hostname: string): string {
  if (key.length < OWNERSHIP_KEY_MIN_BYTES)
    throw new RangeError(`the ownership key must be at least ${OWNERSHIP_KEY_MIN_BYTES} bytes`);
  if (uid === '') throw new RangeError('an ownership token needs the CustomDomain uid');
  return createHmac('sha256', key).update(`${uid}\n${hostname}`).digest('base64url');
}

/** The fields of an ownership decision a proof covers (`OwnershipStatus` without its message). */
export interface OwnershipDecisionFields {
  hostname: string;
  required: boolean;
  reason: string;
  /** RFC 3339, when the TXT record was found. */
  verifiedAt?: string | undefined;
}

/**
 * The proof of an ownership decision written by the operator: base64url of
 * HMAC-SHA256(key, `portico-ownership-decision/v1`, uid, hostname, required, reason, verifiedAt),
 * one field per line (RFC 2104). `status.ownership` can be written by anyone allowed to write a
 * CustomDomain's status; only a decision carrying the proof of this key and this CustomDomain
 * counts (`isOwnershipProof`), so a decision written by anyone else is made again.
 *
 * @param key the operator's ownership key, at least 32 bytes
 * @param uid the CustomDomain's metadata.uid
 * @throws RangeError as `ownershipToken`
 */
export function ownershipProof(key: Uint8Array, uid: string, decision: OwnershipDecisionFields): string {
  if (key.length < OWNERSHIP_KEY_MIN_BYTES)
    throw new RangeError(`the ownership key must be at least ${OWNERSHIP_KEY_MIN_BYTES} bytes`);
  if (uid === '') throw new RangeError('an ownership proof needs the CustomDomain uid');
  const fields = [
    'portico-ownership-decision/v1',
    uid,
    decision.hostname,
    String(decision.required),
    decision.reason,
    decision.verifiedAt ?? '',
  ];
  return createHmac('sha256', key).update(fields.join('\n')).digest('base64url');
}

/**
 * Whether `proof` is `ownershipProof(key, uid, decision)` (compared in constant time). False for a
 * missing proof or an empty uid; never throws on its inputs' content.
 */
export function isOwnershipProof(
  key: Uint8Array,
  uid: string,
  decision: OwnershipDecisionFields,
  proof: string | undefined,
): boolean {
  if (proof === undefined || uid === '' || key.length < OWNERSHIP_KEY_MIN_BYTES) return false;
  const expected = Buffer.from(ownershipProof(key, uid, decision));
  const given = Buffer.from(proof);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The TXT record to create, for status.dnsRecords. */
export function ownershipRecord(hostname: string, token: string): RequiredDnsRecord {
  const name = ownershipRecordName(hostname);
  // The zone is the hostname's: the underscore label is not a hostname label the list can read.
  const zone = registeredDomain(hostname);
  return {
    type: 'TXT',
    name,
    relativeName: relativeName(name, zone),
    zone,
    value: `${OWNERSHIP_VALUE_PREFIX}${token}`,
    ttl: INSTRUCTED_TTL_SECONDS,
    note: 'Proves that you own the domain; it can be removed once the domain is verified.',
  };
}

/** The outcome of one look at the ownership record. */
export type OwnershipVerdict =
  | { shown: true }
  /** `transient`: the lookup failed (SERVFAIL, timeout): say so, and look again soon. */
  | { shown: false; transient: boolean; message: string };

/**
 * Whether `answer` (the TXT RRset at `ownershipRecordName(hostname)`, each value one record's
 * strings joined) holds `portico-verification=<token>` exactly. Other TXT records beside it are
 * fine (a name may carry several).
 */
export function verifyOwnership(hostname: string, token: string, answer: RRsetAnswer): OwnershipVerdict {
  const record = ownershipRecord(hostname, token);
  const wanted = `create TXT ${record.name} with the value "${record.value}"`;
  if (answer.kind === 'records') {
    if (answer.values.some((v) => v.trim() === record.value)) return { shown: true };
    const found = answer.values.map((v) => `"${v}"`).join(', ');
    return {
      shown: false,
      transient: false,
      message: `Ownership not shown: TXT ${record.name} holds ${found}, not the value wanted; ${wanted}.`,
    };
  }
  if (answer.kind === 'nxdomain' || answer.kind === 'nodata') {
    return { shown: false, transient: false, message: `Ownership not shown: ${wanted}.` };
  }
  const why = answer.kind === 'error' ? `failed (${answer.code})` : `failed (${answer.kind})`;
  return {
    shown: false,
    transient: true,
    message: `The lookup of TXT ${record.name} ${why}; Portico will look again. To show ownership, ${wanted}.`,
  };
}

/**
 * The verdict once ownership is required and not yet shown: a matching record is not enough
 * (`OwnershipNotVerified`, transient when the TXT lookup failed); an unverified verdict keeps its
 * reason, and its message also names the TXT record to create.
 */
export function withOwnership(verdict: Verdict, ownership: OwnershipVerdict): Verdict {
  if (ownership.shown) return verdict;
  if (!verdict.verified) {
    // The propagation note stays last, after the TXT record to create.
    const message = verdict.message.endsWith(PROPAGATION_NOTE)
      ? verdict.message.slice(0, -PROPAGATION_NOTE.length).trimEnd()
      : verdict.message;
    return { ...verdict, message: `${message} ${ownership.message} ${PROPAGATION_NOTE}` };
  }
  return {
    verified: false,
    reason: 'OwnershipNotVerified',
    message: `${verdict.message} ${ownership.message} ${PROPAGATION_NOTE}`,
    records: verdict.records,
    transient: ownership.transient,
  };
}

/** A record that another project let a hostname go: left when a claim is released. */
export interface HostnameRelease {
  /** The namespace (project) of the CustomDomain that held the hostname. */
  namespace: string;
  /**
   * That namespace's metadata.uid when the hostname was released; undefined in a record written
   * before release records kept it (or when the namespace was not in the operator's cache), which
   * matches no namespace.
   */
  namespaceUid?: string | undefined;
  /** When the claim was released. */
  releasedAt: Date;
}

/** The claimant's namespace: its name and metadata.uid (undefined when not known). */
export interface ClaimantNamespace {
  name: string;
  uid: string | undefined;
}

/**
 * Whether `release` was made by the claimant's own project: the same namespace, by uid. A namespace
 * deleted and created again under the same name (for someone else) has a new uid, so it is another
 * project; a record without a uid (or a claimant whose uid is not known) matches no namespace.
 */
export function releasedBySameProject(release: HostnameRelease, namespace: ClaimantNamespace): boolean {
  return (
    release.namespace === namespace.name &&
    release.namespaceUid !== undefined &&
    release.namespaceUid !== '' &&
    release.namespaceUid === namespace.uid
  );
}

/** Why ownership is, or is not, required: `status.ownership.reason`. */
export type OwnershipRequirementReason =
  'PolicyAlways' | 'PolicyNever' | 'RecentlyClaimed' | 'NotRecentlyClaimed';

export interface OwnershipRequirement {
  required: boolean;
  reason: OwnershipRequirementReason;
  /** A sentence for a person. */
  message: string;
}

/**
 * Whether a claimant in `namespace` must show the TXT record, under `policy`:
 *
 * - `always`: yes.
 * - `never`: no.
 * - `recently-claimed`: yes when another project (namespace) released the hostname less than
 *   `recentMs` (milliseconds) before `now`; a release by the claimant's own project does not count
 *   (deleting and re-adding one's own domain). The project is the namespace by uid
 *   (`releasedBySameProject`): a namespace of the same name created again is another project.
 *
 * @param release the last release of the hostname, if one is on record
 */
export function ownershipRequirement(
  policy: OwnershipPolicy,
  namespace: ClaimantNamespace,
  release: HostnameRelease | undefined,
  recentMs: number,
  now: Date,
): OwnershipRequirement {
  if (policy === 'always')
    return {
      required: true,
      reason: 'PolicyAlways',
      message: 'The platform asks every new domain to show ownership with a TXT record.',
    };
  if (policy === 'never')
    return { required: false, reason: 'PolicyNever', message: 'Ownership verification is off.' };
  const recent =
    release !== undefined &&
    !releasedBySameProject(release, namespace) &&
    now.getTime() - release.releasedAt.getTime() < recentMs;
  const days = Math.round(recentMs / 86_400_000);
  return recent
    ? {
        required: true,
        reason: 'RecentlyClaimed',
        message: `Another project held this hostname until ${release.releasedAt.toISOString()} (less than ${days} days ago): show ownership with a TXT record.`,
      }
    : {
        required: false,
        reason: 'NotRecentlyClaimed',
        message: `No other project held this hostname in the last ${days} days.`,
      };
}
