import { Counter, Gauge } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObservabilityServer } from './http-server.js';
import { closeServer, listenOn } from '../../test/support/loopback-server.js';
import { TextFamiliesRegistry } from './text-families.js';

const registry = new TextFamiliesRegistry();
const server = createObservabilityServer(registry, () => true);
let base = '';
let collected = 0;
let rendered = 0;

beforeAll(async () => {
  new Counter({ name: 'portico_reconcile_total', help: 'Reconciles.', registers: [registry] }).inc(3);
  new Gauge({ name: 'portico_workqueue_depth', help: 'Queued keys.', registers: [registry] }).set(7);
  new Gauge({
    name: 'portico_customdomain_ready_status',
    help: 'Ready.',
    registers: [registry],
    collect() {
      // A collect callback runs only when its family is rendered.
      collected += 1;
    },
  });
  registry.registerTextGauge('portico_certificate_expiration_timestamp_seconds', 'Expiry.', (out) => {
    rendered += 1;
    out.push('portico_certificate_expiration_timestamp_seconds{name="www"} 1764105834');
  });
  base = `http://127.0.0.1:${String(await listenOn(server))}`;
});

afterAll(() => closeServer(server));

describe('/metrics', () => {
  it('answers every family without a filter', async () => {
    const body = await (await fetch(`${base}/metrics`)).text();
    expect(body).toContain('portico_reconcile_total 3');
    expect(body).toContain('portico_workqueue_depth 7');
    expect(collected).toBe(1);
  });

  it('answers only the families named by name[], without collecting the others', async () => {
    collected = 0;
    const res = await fetch(`${base}/metrics?name[]=portico_reconcile_total&name[]=portico_unknown`);
    expect(res.status).toBe(200);
    const body = await res.text();
    expect(body).toContain('# TYPE portico_reconcile_total counter');
    expect(body).toContain('portico_reconcile_total 3');
    expect(body).not.toContain('portico_workqueue_depth');
    expect(body).not.toContain('portico_unknown');
    expect(collected).toBe(0);
    expect(rendered).toBe(1); // by the first test only
  });

  it('answers a family written as text when named, and only then writes it', async () => {
    const body = await (
      await fetch(`${base}/metrics?name[]=portico_certificate_expiration_timestamp_seconds`)
    ).text();
    expect(body).toContain('portico_certificate_expiration_timestamp_seconds{name="www"} 1764105834');
    expect(body).not.toContain('portico_reconcile_total');
    expect(rendered).toBe(2);
  });
});
