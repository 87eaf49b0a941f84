import { describe, expect, it } from 'vitest';

import { contourClientRate, contourServeArgs } from './sandbox-process.js';

const ports = { xds: 1001, metrics: 1002, health: 1003, debug: 1004 };

/** The value after `flag` in `args`. */
function after(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i === -1 ? undefined : args[i + 1];
}

describe('contourServeArgs', () => {
  it('binds every port it opens on loopback, at the ports given, and publishes 127.0.0.1 on Ingresses', () => {
    const args = contourServeArgs('/k', '/c.yaml', ports);
    expect(args[0]).toBe('serve');
    expect(after(args, '--xds-port')).toBe('1001');
    expect(after(args, '--http-port')).toBe('1002');
    expect(after(args, '--health-port')).toBe('1003');
    expect(after(args, '--debug-http-port')).toBe('1004');
    for (const flag of ['--xds-address', '--http-address', '--health-address', '--debug-http-address'])
      expect(after(args, flag)).toBe('127.0.0.1');
    expect(after(args, '--ingress-status-address')).toBe('127.0.0.1');
    expect(args).toContain('--disable-leader-election');
    expect(after(args, '--kubernetes-client-qps')).toBe('100');
    expect(after(args, '--kubernetes-client-burst')).toBe('200');
    expect(args).not.toContain('--ingress-class-name');
  });

  it("serves one class when given one (a serve flag: after 'serve')", () => {
    const args = contourServeArgs('/k', '/c.yaml', ports, { qps: '5', burst: '10' }, 'portico-edge');
    expect(args[0]).toBe('serve');
    expect(after(args, '--ingress-class-name')).toBe('portico-edge');
  });
});

describe('contourClientRate', () => {
  it('takes numeric overrides from the environment and ignores anything else', () => {
    expect(
      contourClientRate({
        PORTICO_SANDBOX_CONTOUR_CLIENT_QPS: '5',
        PORTICO_SANDBOX_CONTOUR_CLIENT_BURST: '10',
      }),
    ).toEqual({
      qps: '5',
      burst: '10',
    });
    expect(contourClientRate({ PORTICO_SANDBOX_CONTOUR_CLIENT_QPS: 'lots' })).toEqual({
      qps: '100',
      burst: '200',
    });
  });
});
