import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerBuildInfo } from './build-info-metric.js';

describe('portico_build_info', () => {
  it('is one series at 1 labelled with the version, the commit and Node.js', async () => {
    const registry = new Registry();
    registerBuildInfo(registry, { version: '0.2.0', commit: 'abc123' }, 'v24.21.0');
    const text = await registry.metrics();
    expect(text).toContain('# TYPE portico_build_info gauge');
    expect(text).toContain('portico_build_info{version="0.2.0",commit="abc123",node_version="v24.21.0"} 1');
  });
});
