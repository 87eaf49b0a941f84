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
  registry.registerTextGauge('portico_certificate_expiration_timestamp_seconds', 'Expiry.', () => {
    rendered += 1;
    return ['portico_certificate_expiration_timestamp_seconds{name="www"} 1764105834'];
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

describe('/metrics, a large or failing answer', () => {
  /** Serves `registry` for the length of `use`. */
  async function serving(registry: TextFamiliesRegistry, use: (url: string) => Promise<void>): Promise<void> {
    const own = createObservabilityServer(registry, () => true);
    try {
      await use(`http://127.0.0.1:${String(await listenOn(own))}/metrics`);
    } finally {
      await closeServer(own);
    }
  }

  it('sends a family of megabytes whole, in chunks, with the exposition content type', async () => {
    const big = new TextFamiliesRegistry();
    new Counter({ name: 'portico_reconcile_total', help: 'Reconciles.', registers: [big] }).inc(3);
    big.registerTextGauge('portico_customdomain_ready_status', 'Ready.', function* lines() {
      for (let i = 0; i < 60_000; i++) yield `portico_customdomain_ready_status{name="d${String(i)}"} 1`;
    });
    await serving(big, async (url) => {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(big.contentType);
      const body = await res.text();
      expect(body.length).toBeGreaterThan(2_000_000);
      expect(body).toBe(await big.metrics());
    });
  });

  it('answers 500 when a collect callback fails before anything is sent', async () => {
    const failing = new TextFamiliesRegistry();
    new Gauge({
      name: 'portico_workqueue_depth',
      help: 'Queued keys.',
      registers: [failing],
      collect() {
        throw new Error('the queue is gone');
      },
    });
    await serving(failing, async (url) => {
      const res = await fetch(url);
      expect(res.status).toBe(500);
      expect(await res.text()).toContain('the queue is gone');
    });
  });

  it('cuts the answer when a family fails after the first chunk, so no scrape takes it as whole', async () => {
    const cut = new TextFamiliesRegistry();
    cut.registerTextGauge('portico_customdomain_ready_status', 'Ready.', function* lines() {
      for (let i = 0; i < 20_000; i++) yield `portico_customdomain_ready_status{name="d${String(i)}"} 1`;
      throw new Error('the cache went away');
    });
    await serving(cut, async (url) => {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      await expect(res.text()).rejects.toThrow();
    });
  });
});
