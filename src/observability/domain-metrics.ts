/**
 * The per-CustomDomain metrics (docs/monitoring.md, "Per-domain status"): each domain's Ready
 * status, its certificate's expiry and renewal times, and the fleet counted by phase and reason.
 * These are the exception to "no hostname labels" (as cert-manager's per-certificate metrics are),
 * so at 10,000 domains they must cost no memory between scrapes: nothing is kept in prom-client;
 * each scrape reads the CustomDomain informer cache the controller already holds
 * (`CustomDomainSource`) and writes the series then, as text (text-families.ts).
 *
 * The time from verified to Live is a histogram observed from the CustomDomain watch: once per
 * transition of the Ready condition to True (`ReadyTransitions`).
 */
import { Histogram, type Registry } from 'prom-client';
import type { Condition, CustomDomain } from '../api/customdomain.js';
import { escapeLabelValue, formatSampleValue, type TextFamiliesRegistry } from './text-families.js';

/** Where the scrape reads the CustomDomains: the controller's informer cache. */
export type CustomDomainSource = () => Iterable<CustomDomain>;

/** One sample of a metric (prom-client's `MetricValue`, without the exemplar). */
interface Sample {
  value: number;
  labels: Record<string, string | number>;
}

/** What prom-client's registry reads of a metric (`Registry.getMetricsAsString`, `getMetricsAsJSON`). */
interface ScrapeTimeMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'gauge';
  readonly aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: 'gauge'; aggregator: 'sum'; values: Sample[] }>;
  reset(): void;
}

/**
 * A gauge whose samples `read` builds at each scrape and nobody keeps afterwards: prom-client's own
 * Gauge keeps a hash entry per label set until reset, which here would mean one per domain for good.
 */
function scrapeTimeGauge(name: string, help: string, read: () => Sample[]): ScrapeTimeMetric {
  return {
    name,
    help,
    type: 'gauge',
    aggregator: 'sum',
    get: () => Promise.resolve({ name, help, type: 'gauge', aggregator: 'sum', values: read() }),
    reset: () => undefined,
  };
}

/** The condition `type` of `domain`, if it has one. */
function condition(domain: CustomDomain, type: string): Condition | undefined {
  return domain.status?.conditions?.find((c) => c.type === type);
}

/** Seconds since the Unix epoch of an RFC 3339 time, or undefined when absent or unparsable. */
function unixSeconds(time: string | undefined): number | undefined {
  if (time === undefined) return undefined;
  const ms = Date.parse(time);
  return Number.isNaN(ms) ? undefined : ms / 1000;
}

const READY_STATUSES = ['True', 'False', 'Unknown'] as const;

/** Phase and reason reported for a domain that has no status yet (not reconciled). */
const NO_STATUS = '';

/**
 * The per-domain gauges and the fleet count, read from `source()` at each scrape (Unix seconds for
 * the timestamps; label values as in the CustomDomain: `namespace`, `name`, `spec.hostname`):
 *
 * - `portico_customdomain_ready_status{namespace,name,hostname,condition}`: 1 for the status of the
 *   Ready condition (`True`, `False`, `Unknown`; `Unknown` while there is no Ready condition), 0 for
 *   the other two, as cert-manager's `certmanager_certificate_ready_status`.
 * - `portico_customdomain_verified_timestamp_seconds{namespace,name,hostname}`: while the DNSVerified
 *   condition is True, its lastTransitionTime (when DNS verification last turned true); absent otherwise.
 * - `portico_certificate_expiration_timestamp_seconds{namespace,name,hostname}`: `status.certificate.notAfter`.
 * - `portico_certificate_renewal_timestamp_seconds{namespace,name,hostname}`: `status.certificate.renewalTime`.
 * - `portico_customdomains{phase,reason}`: domains by `status.phase` and the Ready condition's reason
 *   (both empty before the first status write).
 *
 * The four per-domain families are written as text (text-families.ts: one line per series from the
 * cached object, no sample objects); the fleet count, a few series, goes through prom-client.
 * Returns the prom-client metrics registered in `registry`.
 */
export function registerDomainMetrics(
  registry: TextFamiliesRegistry,
  source: CustomDomainSource,
): ScrapeTimeMetric[] {
  /** Yields the lines `sample` appends for each domain in turn, given the series with its labels. */
  const perDomain = (name: string, sample: (domain: CustomDomain, out: string[], series: string) => void) =>
    function* lines(): Generator<string, void, undefined> {
      const out: string[] = [];
      for (const domain of source()) {
        const { namespace, name: domainName } = domain.metadata;
        const labels = `namespace="${escapeLabelValue(namespace)}",name="${escapeLabelValue(domainName)}",hostname="${escapeLabelValue(domain.spec.hostname)}"`;
        sample(domain, out, `${name}{${labels}`);
        yield* out;
        out.length = 0;
      }
    };
  const timestamp = (name: string, field: 'notAfter' | 'renewalTime') =>
    perDomain(name, (domain, out, series) => {
      const value = unixSeconds(domain.status?.certificate?.[field]);
      if (value !== undefined) out.push(`${series}} ${formatSampleValue(value)}`);
    });
  registry.registerTextGauge(
    'portico_customdomain_ready_status',
    "Status of each CustomDomain's Ready condition: 1 for the condition's status (True, False, Unknown), 0 for the other two; Unknown while the domain has no Ready condition.",
    perDomain('portico_customdomain_ready_status', (domain, out, series) => {
      const status = condition(domain, 'Ready')?.status ?? 'Unknown';
      for (const c of READY_STATUSES) out.push(`${series},condition="${c}"} ${c === status ? '1' : '0'}`);
    }),
  );
  registry.registerTextGauge(
    'portico_customdomain_verified_timestamp_seconds',
    "When each CustomDomain's DNS verification last turned true (the DNSVerified condition's lastTransitionTime while it is True), Unix time in seconds; absent while not verified.",
    perDomain('portico_customdomain_verified_timestamp_seconds', (domain, out, series) => {
      const verified = condition(domain, 'DNSVerified');
      const value = verified?.status === 'True' ? unixSeconds(verified.lastTransitionTime) : undefined;
      if (value !== undefined) out.push(`${series}} ${formatSampleValue(value)}`);
    }),
  );
  registry.registerTextGauge(
    'portico_certificate_expiration_timestamp_seconds',
    'notAfter of the certificate serving each CustomDomain (status.certificate.notAfter), Unix time in seconds.',
    timestamp('portico_certificate_expiration_timestamp_seconds', 'notAfter'),
  );
  registry.registerTextGauge(
    'portico_certificate_renewal_timestamp_seconds',
    "When the operator renews each CustomDomain's certificate (status.certificate.renewalTime), Unix time in seconds.",
    timestamp('portico_certificate_renewal_timestamp_seconds', 'renewalTime'),
  );
  const metrics = [
    scrapeTimeGauge(
      'portico_customdomains',
      "CustomDomains by phase (status.phase) and the Ready condition's reason; both empty before the first status write.",
      () => {
        const counts = new Map<string, Sample>();
        for (const domain of source()) {
          const phase = domain.status?.phase ?? NO_STATUS;
          const reason = condition(domain, 'Ready')?.reason ?? NO_STATUS;
          const key = `${phase}\u0000${reason}`;
          const sample = counts.get(key);
          if (sample) sample.value += 1;
          else counts.set(key, { labels: { phase, reason }, value: 1 });
        }
        return [...counts.values()];
      },
    ),
  ];
  // The registry takes any object with a name and get() (prom-client's Registry.registerMetric).
  for (const metric of metrics)
    registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
  return metrics;
}

/**
 * Since when a domain not Ready has been so, ms since the epoch: its Ready condition's
 * lastTransitionTime, else its creation (a client-node Date, or the API's RFC 3339 string), else 0.
 */
function notReadyTime(ready: Condition | undefined, created: Date | string | undefined): number {
  const transition = Date.parse(ready?.lastTransitionTime ?? '');
  if (!Number.isNaN(transition)) return transition;
  const creation = created instanceof Date ? created.getTime() : Date.parse(created ?? '');
  return Number.isNaN(creation) ? 0 : creation;
}

/** Buckets of the verified-to-Live histogram, seconds: a minute to a day (condition times have whole seconds). */
export const VERIFIED_TO_LIVE_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];

/**
 * Observes `portico_customdomain_verified_to_live_seconds` from the CustomDomain watch's events:
 * once each time a domain's Ready condition turns True, the seconds from the DNSVerified condition's
 * lastTransitionTime to the Ready condition's. The watch gives only the new object, so the domains
 * not Ready are remembered (key to the time they were last seen not Ready: their Ready condition's
 * lastTransitionTime, or their creation); Ready domains cost nothing, and a resync or a status
 * write that keeps Ready True observes nothing.
 *
 * A domain that lost Ready for another reason while DNS stayed verified (its DNSVerified transition
 * is older than its loss of Ready) is not observed when it comes back: that is no time from
 * verification to Live. A domain Ready when first seen (the initial list after a start or a new
 * leader) is not observed either: its transition was counted, if at all, by the operator that saw it.
 */
export class ReadyTransitions {
  /** Histogram the transitions are observed in. */
  readonly histogram: Histogram;
  /** Key (`namespace/name`) to the time, ms since the epoch, since which that domain is not Ready. */
  readonly #notReadySince = new Map<string, number>();

  constructor(registry: Registry) {
    this.histogram = new Histogram({
      name: 'portico_customdomain_verified_to_live_seconds',
      help: "Time from a CustomDomain's DNS verification (the DNSVerified condition's lastTransitionTime) to its Ready condition turning True, seconds; observed once per transition to Ready.",
      buckets: VERIFIED_TO_LIVE_BUCKETS,
      registers: [registry],
    });
  }

  /** Domains remembered as not Ready (for tests and sizing). */
  get notReadyCount(): number {
    return this.#notReadySince.size;
  }

  /** Takes one event of the CustomDomain watch (`verb` as the informer reports it). */
  onChange(domain: CustomDomain, verb: 'add' | 'update' | 'delete'): void {
    const key = `${domain.metadata.namespace}/${domain.metadata.name}`;
    if (verb === 'delete') {
      this.#notReadySince.delete(key);
      return;
    }
    const ready = condition(domain, 'Ready');
    if (ready?.status !== 'True') {
      // The first time seen not Ready counts: a later False to Unknown keeps the domain not Ready.
      if (!this.#notReadySince.has(key))
        this.#notReadySince.set(key, notReadyTime(ready, domain.metadata.creationTimestamp));
      return;
    }
    const notReadySince = this.#notReadySince.get(key);
    if (notReadySince === undefined) return;
    this.#notReadySince.delete(key);
    const verifiedAt = Date.parse(condition(domain, 'DNSVerified')?.lastTransitionTime ?? '');
    const liveAt = Date.parse(ready.lastTransitionTime);
    if (Number.isNaN(verifiedAt) || Number.isNaN(liveAt) || verifiedAt < notReadySince) return;
    this.histogram.observe(Math.max(0, (liveAt - verifiedAt) / 1000));
  }
}
