/**
 * The operator's Prometheus metrics (prom-client). One registry per process, served at `/metrics`.
 * Names follow Prometheus conventions: `_total` counters, `_seconds` durations, base units.
 */
import { Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
import { TextFamiliesRegistry } from './text-families.js';
import { ReadyTransitions, registerDomainMetrics, type CustomDomainSource } from './domain-metrics.js';
import { VERDICT_REASONS } from '../dns/verdict.js';
import { registerSharedMetrics } from './shared-metrics.js';
import { buildInfo } from '../build-info.js';
import { registerBuildInfo } from './build-info-metric.js';

/**
 * Why a memory reduction ran (the `reason` label of `portico_memory_reductions_total`): growth while
 * busy, growth once idle, or the memory target (src/controller/memory-reducer.ts decides which).
 */
export const REDUCTION_REASONS = ['growth', 'idle', 'target'] as const;

/** The `result` values of `portico_acme_orders_total`. */
export const ACME_ORDER_RESULTS = ['valid', 'failed', 'cancelled'] as const;

export interface ControllerMetrics {
  registry: TextFamiliesRegistry;
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileDuration: Histogram<'controller'>;
  workqueueDepth: Gauge<'controller'>;
  dnsChecksTotal: Counter<'reason'>;
  acmeOrdersTotal: Counter<'result'>;
  /** Domain Secrets given back their last good certificate (docs/customdomains.md, "The last good certificate"). */
  certificateRestoresTotal: Counter;
  /** Observes `portico_customdomain_verified_to_live_seconds` from the CustomDomain watch's events. */
  readyTransitions: ReadyTransitions;
  /**
   * Sets where the per-domain metrics (domain-metrics.ts) read the CustomDomains at each scrape:
   * the controller's informer cache. Until set, they are declared with no series.
   */
  readCustomDomainsFrom(source: CustomDomainSource): void;
  /** 1 for each CustomDomain reported as a dangling record (DNSVerified reason DanglingRecord). */
  danglingDomains: Gauge<'namespace' | 'name' | 'hostname'>;
  /**
   * Routes Portico does not own that name a domain's hostname (docs/routing.md, "Foreign routes");
   * absent at 0.
   */
  foreignRoutes: Gauge<'namespace' | 'name' | 'hostname'>;
  /** Footprint-reducing collections asked of V8 after the RSS grew (controller/memory-reducer.ts). */
  memoryReductionsTotal: Counter;
  memoryHoldSecondsTotal: Counter;
}

/**
 * The operator's registry and the metrics the reconciles record. The registry also holds the
 * process-wide metrics of shared-metrics.ts (ACME requests, leader election, the order budget, the
 * work queues), the per-domain metrics of domain-metrics.ts (read from the CustomDomain cache at
 * each scrape, once `readCustomDomainsFrom` is called) and Node's process metrics. Every metric is listed in docs/monitoring.md.
 */
export function createControllerMetrics(): ControllerMetrics {
  const registry = new TextFamiliesRegistry();
  // Node's process metrics under their standard names (process_*, nodejs_*), which stock Node.js
  // dashboards and alerts look for (docs/monitoring.md, "Node.js process").
  collectDefaultMetrics({ register: registry });
  registerSharedMetrics(registry);
  registerBuildInfo(registry, buildInfo(), process.version);
  let domains: CustomDomainSource = () => [];
  registerDomainMetrics(registry, () => domains());
  const registers = [registry];
  const metrics: ControllerMetrics = {
    registry,
    readyTransitions: new ReadyTransitions(registry),
    readCustomDomainsFrom: (source) => {
      domains = source;
    },
    reconcileTotal: new Counter({
      name: 'portico_reconcile_total',
      help: 'Reconciles by controller and result (success, error, conflict).',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileDuration: new Histogram({
      name: 'portico_reconcile_duration_seconds',
      help: 'Time spent in one reconcile, seconds.',
      labelNames: ['controller'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    workqueueDepth: new Gauge({
      name: 'portico_workqueue_depth',
      help: 'Keys waiting in the work queue.',
      labelNames: ['controller'],
      registers,
    }),
    dnsChecksTotal: new Counter({
      name: 'portico_dns_checks_total',
      help: 'DNS verification checks by verdict reason.',
      labelNames: ['reason'],
      registers,
    }),
    acmeOrdersTotal: new Counter({
      name: 'portico_acme_orders_total',
      help: 'ACME orders by result (valid, failed, cancelled: the domain was removed while its order ran).',
      labelNames: ['result'],
      registers,
    }),
    certificateRestoresTotal: new Counter({
      name: 'portico_certificate_restores_total',
      help: 'CustomDomain Secrets found unable to serve (edited, replaced or deleted by someone else) and given back the last good certificate Portico keeps in its own namespace.',
      registers,
    }),
    danglingDomains: new Gauge({
      name: 'portico_customdomain_dangling',
      help: 'CustomDomains still attached whose DNS has pointed elsewhere longer than --dangling-after-seconds (1 each; absent otherwise).',
      labelNames: ['namespace', 'name', 'hostname'],
      registers,
    }),
    foreignRoutes: new Gauge({
      name: 'portico_customdomain_foreign_routes',
      help: 'Ingresses, HTTPProxies and HTTPRoutes that Portico does not own naming the hostname of a CustomDomain (its Conflicted condition); absent when none.',
      labelNames: ['namespace', 'name', 'hostname'],
      registers,
    }),
    memoryReductionsTotal: new Counter({
      name: 'portico_memory_reductions_total',
      help: 'Full garbage collections that give unused heap back to the system, by reason: growth (the resident set grew by --memory-reduction-growth-mib), idle (by 16 MiB once the work queue stayed empty) or target (it reached --memory-target-mib).',
      labelNames: ['reason'],
      registers,
    }),
    memoryHoldSecondsTotal: new Counter({
      name: 'portico_memory_hold_seconds_total',
      help: 'Seconds the reconcile workers and the requests to the ACME CA were held because the resident set was at --memory-target-mib or above it less than 2 s after the last collection, until the next one brought it down.',
      registers,
    }),
  };
  // Every known label value exported at 0 from the start, so that the first order or check of a
  // kind shows as a step to increase() and rate(), not as a series that appears already counted.
  for (const result of ACME_ORDER_RESULTS) metrics.acmeOrdersTotal.inc({ result }, 0);
  for (const reason of REDUCTION_REASONS) metrics.memoryReductionsTotal.inc({ reason }, 0);
  for (const reason of VERDICT_REASONS) metrics.dnsChecksTotal.inc({ reason }, 0);
  return metrics;
}
