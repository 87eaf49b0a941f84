import { Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { escapeLabelValue, formatSampleValue, TextFamiliesRegistry } from './text-families.js';

const HELP = 'A help text with a \\ backslash\nand a second line.';
const SAMPLES: { labels: { namespace: string; hostname: string }; value: number }[] = [
  { labels: { namespace: 'shop', hostname: 'www.shop.example' }, value: 1764105834.684 },
  { labels: { namespace: 'we"ird\\ns', hostname: 'line\nfeed' }, value: 0 },
  { labels: { namespace: 'big', hostname: 'inf.example' }, value: Infinity },
];

describe('TextFamiliesRegistry', () => {
  it('writes a family as prom-client writes the same gauge (escaping, values, HELP and TYPE)', async () => {
    const reference = new Registry();
    const gauge = new Gauge({
      name: 'x_seconds',
      help: HELP,
      labelNames: ['namespace', 'hostname'],
      registers: [reference],
    });
    for (const { labels, value } of SAMPLES) gauge.set(labels, value);

    const text = new TextFamiliesRegistry();
    text.registerTextGauge('x_seconds', HELP, () =>
      SAMPLES.map(
        ({ labels, value }) =>
          `x_seconds{namespace="${escapeLabelValue(labels.namespace)}",hostname="${escapeLabelValue(labels.hostname)}"} ${formatSampleValue(value)}`,
      ),
    );

    expect((await text.metrics()).trim()).toBe((await reference.metrics()).trim());
    expect((await text.getSingleMetricAsString('x_seconds')).trim()).toBe((await reference.metrics()).trim());
  });

  it('follows its own prom-client metrics, and refuses a second metric of the same name', async () => {
    const registry = new TextFamiliesRegistry();
    new Gauge({ name: 'own', help: 'Own.', registers: [registry] }).set(2);
    registry.registerTextGauge('text', 'Text.', () => ['text 3']);
    expect(await registry.metrics()).toMatch(
      /^# HELP own Own\.\n# TYPE own gauge\nown 2\n\n# HELP text Text\.\n# TYPE text gauge\ntext 3\n$/,
    );
    expect(registry.hasTextFamily('text')).toBe(true);
    expect(registry.hasTextFamily('own')).toBe(false);
    expect(() => {
      registry.registerTextGauge('own', 'Again.', () => []);
    }).toThrow(/already registered/);
    expect(() => {
      registry.registerTextGauge('text', 'Again.', () => []);
    }).toThrow(/already registered/);
  });

  it('gives the same text in chunks, a large family in pieces of about 64 Ki characters written as asked', async () => {
    const registry = new TextFamiliesRegistry();
    new Gauge({ name: 'own', help: 'Own.', registers: [registry] }).set(2);
    let written = 0;
    registry.registerTextGauge('big', 'Big.', function* lines() {
      for (let i = 0; i < 20_000; i++) {
        written += 1;
        yield `big{name="d${String(i)}.example"} ${String(i)}`;
      }
    });
    registry.registerTextGauge('empty', 'Empty.', () => []);

    const chunks: string[] = [];
    const writtenBefore: number[] = [];
    for await (const chunk of registry.metricsChunks()) {
      chunks.push(chunk);
      writtenBefore.push(written);
    }
    expect(chunks.join('')).toBe(await registry.metrics());
    expect(chunks.join('')).toMatch(
      /\nbig\{name="d19999\.example"\} 19999\n\n# HELP empty Empty\.\n# TYPE empty gauge\n$/,
    );
    const big = chunks.filter((chunk) => chunk.includes('big{'));
    expect(big.length).toBeGreaterThan(5);
    for (const chunk of big.slice(0, -1)) expect(chunk.length).toBeLessThan(64 * 1024 + 100);
    // Lines are written as their chunk is asked for, not all before the first is sent.
    expect(writtenBefore[chunks.indexOf(big[0] ?? '')]).toBeLessThan(20_000);
  });
});
