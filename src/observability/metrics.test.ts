import { describe, expect, it } from 'vitest';
import { VERDICT_REASONS } from '../dns/verdict.js';
import { ACME_ORDER_RESULTS, createControllerMetrics } from './metrics.js';

describe('createControllerMetrics', () => {
  it('exports every order result and DNS verdict at 0 before the first one, so increase() sees the first', async () => {
    const text = await createControllerMetrics().registry.metrics();
    for (const result of ACME_ORDER_RESULTS)
      expect(text).toContain(`portico_acme_orders_total{result="${result}"} 0\n`);
    for (const reason of VERDICT_REASONS)
      expect(text).toContain(`portico_dns_checks_total{reason="${reason}"} 0\n`);
  });

  it('counts from 0 once the first one happens', async () => {
    const metrics = createControllerMetrics();
    metrics.acmeOrdersTotal.inc({ result: 'valid' });
    const text = await metrics.registry.metrics();
    expect(text).toContain('portico_acme_orders_total{result="valid"} 1\n');
    expect(text).toContain('portico_acme_orders_total{result="failed"} 0\n');
  });
});
