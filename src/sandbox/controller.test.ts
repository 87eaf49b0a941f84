import { describe, expect, it } from 'vitest';
import { controllerArgs, type ControllerOptions } from './controller.js';

const options: ControllerOptions = {
  kubeconfig: '/tmp/kubeconfig',
  platformCnameTarget: 'sites.portico.test',
  dnsServer: '127.0.0.1:5353',
  acmeDirectoryUrl: 'https://127.0.0.1:14000/dir',
  acmeEmail: 'ops@portico.test',
  acmeCaBundle: '/tmp/ca.pem',
  http01Port: 5002,
  metricsPort: 9090,
  namespace: 'portico-system',
  dataPlaneAcknowledgement: true,
  rateLimitAttachments: [],
};

/** The value following `flag` in `args`; undefined when the flag is absent. */
function valueOf(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
}

describe('controllerArgs', () => {
  it('turns the serving check on only where the sandbox gives a data plane address', () => {
    expect(controllerArgs(options)).not.toContain('--serving-check-address');
    const withTraefik = controllerArgs({ ...options, servingCheckAddress: '127.0.0.1:8443' });
    expect(valueOf(withTraefik, '--serving-check-address')).toBe('127.0.0.1:8443');
  });
});
