/**
 * The compiled rate-limit config: what the operator writes into the config ConfigMaps (key
 * `config.json`) and the rate-limit server loads. This schema is the one thing, besides the load
 * report, that the operator and the server share (docs/architecture.md, "Which folder may import
 * which").
 *
 * The config is split over several ConfigMaps (shards), so the sum of all policies has no ceiling:
 * the API server refuses a ConfigMap whose data is over 1 MiB (Kubernetes `MaxSecretSize`, also used
 * for ConfigMaps). Shard 0 is named `--config-name` (`portico-ratelimit-config`, the name of the
 * single ConfigMap of earlier versions), shard n ≥ 1 is `<config-name>-<n>`. Each shard is a whole
 * document of the schema below holding some of the policies; a policy is in one shard. One policy's
 * entry is at most MAX_POLICY_CONFIG_BYTES, and the operator fills a shard up to
 * CONFIG_SHARD_BUDGET_BYTES, so every policy that is accepted fits in a shard of its own.
 *
 * The server checks every policy entry on its own: an entry that breaks a rule is rejected and
 * reported (the policy's Enforced condition turns False with the reason), while the other entries load.
 * A document that is not JSON or has a schema version this server does not know is rejected whole.
 * Pure: no I/O.
 */
import { z } from 'zod';
import { ConfigRejectedError } from './errors.js';

/** The schema version this code writes and reads. */
export const CONFIG_SCHEMA_VERSION = 1;

/** Envoy carries a limit as uint32 (rls.proto, RateLimitResponse.RateLimit.requests_per_unit). */
export const MAX_LIMIT = 4_294_967_295;
/** Ban durations from 1 s to 7 days (the CRD's rule). */
export const MAX_BAN_SECONDS = 7 * 24 * 3600;
/**
 * The largest compiled entry of one policy, in bytes of UTF-8 JSON (512 KiB). A policy at the CRD's
 * bounds with ASCII key ids (1,000 overrides of 256 characters) compiles to about 330 KB; key ids of
 * characters that take 2 to 4 bytes in UTF-8 can pass the CRD's character counts and exceed this.
 */
export const MAX_POLICY_CONFIG_BYTES = 512 * 1024;
/**
 * The most bytes of UTF-8 the override key ids of one policy may take together (384 KiB; the CRD's
 * rule on spec.overrides). With it, only key ids full of characters JSON escapes (quotes,
 * backslashes, control characters) can make a policy exceed MAX_POLICY_CONFIG_BYTES.
 */
export const MAX_OVERRIDE_KEY_ID_BYTES = 384 * 1024;
/**
 * The operator fills one config ConfigMap up to this many bytes of `config.json` (768 KiB), under the
 * API server's 1 MiB limit on a ConfigMap's data, and above MAX_POLICY_CONFIG_BYTES.
 */
export const CONFIG_SHARD_BUDGET_BYTES = 768 * 1024;

const limit = z.number().int().min(1).max(MAX_LIMIT);
const windowLimits = { requestsPerMinute: limit, requestsPerDay: limit };
const dayAtLeastMinute = (l: { requestsPerMinute: number; requestsPerDay: number }): boolean =>
  l.requestsPerDay >= l.requestsPerMinute;
const dayRule = { message: 'requestsPerDay must be at least requestsPerMinute', path: ['requestsPerDay'] };

const compiledPlan = z
  .object({ name: z.string().min(1).max(63), ...windowLimits })
  .refine(dayAtLeastMinute, dayRule);

const compiledOverride = z
  .object({ keyId: z.string().min(1).max(256), ...windowLimits })
  .refine(dayAtLeastMinute, dayRule);

const unique = <T>(items: readonly T[], key: (item: T) => string): boolean =>
  new Set(items.map(key)).size === items.length;

/** One policy, compiled. */
export const compiledPolicySchema = z
  .object({
    /** `<namespace>/<name>`: the `domain` of Envoy's RateLimitRequest. */
    domain: z.string().min(3).max(317),
    /** metadata.uid of the policy, so a re-created policy is not mistaken for the old one. */
    uid: z.string().max(64),
    /** metadata.generation of the policy this entry was compiled from. */
    generation: z.number().int().min(1),
    plans: z.array(compiledPlan).min(1).max(32),
    defaultPlan: z.string().min(1),
    overrides: z.array(compiledOverride).max(1000),
    /** Absent: never ban. */
    ban: z
      .object({
        afterRejectedRequests: z.number().int().min(1).max(1_000_000),
        /** Seconds. */
        durationSeconds: z.number().int().min(1).max(MAX_BAN_SECONDS),
      })
      .optional(),
    /**
     * What a descriptor without `key_id` gets (`limits.ts`). Absent: `LimitByRemoteAddress`. A server
     * of an earlier version ignores the field (zod drops unknown keys) and leaves such a descriptor
     * unlimited, as it always did.
     */
    missingKeyId: z.enum(['LimitByRemoteAddress', 'Refuse']).optional(),
  })
  .refine((p) => unique(p.plans, (x) => x.name), { message: 'plan names must be unique', path: ['plans'] })
  .refine((p) => p.plans.some((x) => x.name === p.defaultPlan), {
    message: 'defaultPlan must name one of plans',
    path: ['defaultPlan'],
  })
  .refine((p) => unique(p.overrides, (x) => x.keyId), {
    message: 'override keyIds must be unique',
    path: ['overrides'],
  });

export type CompiledPolicy = z.infer<typeof compiledPolicySchema>;
export type CompiledPlan = CompiledPolicy['plans'][number];

/** The whole document. `policies` are sorted by domain so the same input always gives the same bytes. */
export interface CompiledConfig {
  schemaVersion: typeof CONFIG_SCHEMA_VERSION;
  policies: CompiledPolicy[];
}

const envelopeSchema = z.object({
  schemaVersion: z.number().int(),
  policies: z.array(z.unknown()),
});

/** An entry the server refused, with the reason the operator shows on the policy. */
export interface RejectedEntry {
  /** The entry's domain, uid and generation as far as they could be read. */
  domain: string;
  uid: string;
  generation: number;
  /** UpperCamelCase. */
  reason: 'InvalidPolicy';
  message: string;
}

export interface ParsedConfig {
  policies: CompiledPolicy[];
  rejected: RejectedEntry[];
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(entry)'}: ${i.message}`)
    .join('; ');
}

function identity(entry: unknown): { domain: string; uid: string; generation: number } {
  const e = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
  return {
    domain: typeof e['domain'] === 'string' ? e['domain'] : '',
    uid: typeof e['uid'] === 'string' ? e['uid'] : '',
    generation: typeof e['generation'] === 'number' ? e['generation'] : 0,
  };
}

/**
 * Reads `config.json`. Valid entries load; invalid ones (and a second entry of one domain) are
 * returned in `rejected` with a message naming each broken rule.
 *
 * @throws ConfigRejectedError (code `RATELIMIT_CONFIG_REJECTED`) when the text is not JSON, not an
 *   object with `schemaVersion` and `policies`, or has a schema version other than 1
 */
export function parseCompiledConfig(text: string): ParsedConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err: unknown) {
    throw new ConfigRejectedError(
      'InvalidJSON',
      `config.json is not JSON: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const envelope = envelopeSchema.safeParse(json);
  if (!envelope.success) {
    throw new ConfigRejectedError('InvalidConfig', `config.json: ${describeIssues(envelope.error)}`);
  }
  if (envelope.data.schemaVersion !== CONFIG_SCHEMA_VERSION) {
    throw new ConfigRejectedError(
      'UnsupportedSchemaVersion',
      `config.json has schemaVersion ${envelope.data.schemaVersion}; this rate-limit server reads ` +
        `version ${CONFIG_SCHEMA_VERSION}: run the same Portico version for the operator and the server`,
    );
  }
  const policies: CompiledPolicy[] = [];
  const rejected: RejectedEntry[] = [];
  const seen = new Set<string>();
  for (const entry of envelope.data.policies) {
    const result = compiledPolicySchema.safeParse(entry);
    if (!result.success) {
      rejected.push({ ...identity(entry), reason: 'InvalidPolicy', message: describeIssues(result.error) });
    } else if (seen.has(result.data.domain)) {
      rejected.push({
        ...identity(entry),
        reason: 'InvalidPolicy',
        message: `a second entry for domain ${result.data.domain}`,
      });
    } else {
      seen.add(result.data.domain);
      policies.push(result.data);
    }
  }
  return { policies, rejected };
}

/** The JSON text of one entry in a rendered document (compact; the operator measures its size). */
export function renderCompiledEntry(policy: CompiledPolicy): string {
  return JSON.stringify(policy);
}

const HEAD = `{"schemaVersion":${CONFIG_SCHEMA_VERSION},"policies":[`;
const TAIL = '\n]}\n';

/**
 * Bytes of UTF-8 of a document holding entries of `entryBytes` bytes each (as rendered by
 * `renderCompiledEntry`): the envelope, and a line break and a comma per entry. Pure.
 */
export function renderedConfigBytes(entryBytes: readonly number[]): number {
  if (entryBytes.length === 0) return HEAD.length + 3;
  return HEAD.length + TAIL.length + entryBytes.reduce((sum, b) => sum + b + 2, 0) - 1;
}

/**
 * Renders a document from entries already rendered by `renderCompiledEntry`, sorted by domain, one
 * entry per line (so `kubectl get cm -o yaml` stays readable and the size is easy to count). Pure.
 */
export function renderConfigEntries(entries: readonly { domain: string; text: string }[]): string {
  const sorted = [...entries].sort((a, b) => (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0));
  if (sorted.length === 0) return `${HEAD}]}\n`;
  return `${HEAD}\n${sorted.map((e) => e.text).join(',\n')}${TAIL}`;
}

/** Renders the document the operator writes: stable key order, policies sorted by domain. Pure. */
export function renderCompiledConfig(policies: readonly CompiledPolicy[]): string {
  return renderConfigEntries(policies.map((p) => ({ domain: p.domain, text: renderCompiledEntry(p) })));
}

/**
 * The name of config shard `index`: `configName` for 0, `<configName>-<index>` after it. Pure.
 */
export function configShardName(configName: string, index: number): string {
  return index === 0 ? configName : `${configName}-${index}`;
}

/**
 * The index of the config shard named `name`, or undefined when `name` is not a shard of
 * `configName` (for example the status ConfigMap). Pure.
 */
export function configShardIndex(configName: string, name: string): number | undefined {
  if (name === configName) return 0;
  if (!name.startsWith(`${configName}-`)) return undefined;
  const rest = name.slice(configName.length + 1);
  return /^[1-9][0-9]{0,5}$/.test(rest) ? Number(rest) : undefined;
}
