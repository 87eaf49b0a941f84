/**
 * The HostnameClaim CRD's validation, against the real API server: the name must be a hostname, a
 * claim never changes hands in place, and `kubectl get hostnameclaims` shows who holds what.
 */
import { describe, expect, it } from 'vitest';
import { hostnameClaim, hostnameClaimApi, kube, unique } from './support/cluster.js';
import { kubectl } from './support/helm.js';

function claim(name: string): object {
  return hostnameClaim(name, { namespace: 'shop', name: 'www', uid: 'uid-1' });
}

/** The API server's message for a refused request, or '' when it was accepted. */
async function refusal(request: Promise<unknown>): Promise<string> {
  try {
    await request;
    return '';
  } catch (err) {
    return String((err as { body?: unknown }).body ?? err);
  }
}

describe('HostnameClaim', () => {
  it.each(['localhost', 'www.example.com-', 'a..example.com'])(
    'refuses the name %j, saying why',
    async (name) => {
      const message = await refusal(
        kube().custom.createClusterCustomObject({ ...hostnameClaimApi, body: claim(name), dryRun: 'All' }),
      );
      expect(message).toContain('the name of a HostnameClaim is the hostname it claims');
    },
  );

  it('accepts a hostname and refuses to move the claim to another CustomDomain', async () => {
    const name = `${unique('claim')}.example.com`;
    await kube().custom.createClusterCustomObject({ ...hostnameClaimApi, body: claim(name) });
    try {
      const message = await refusal(
        kube().custom.patchClusterCustomObject({
          ...hostnameClaimApi,
          name,
          body: [{ op: 'replace', path: '/spec/customDomainRef/namespace', value: 'thief' }],
        }),
      );
      expect(message).toContain('a HostnameClaim cannot be moved to another CustomDomain');

      const table = await kubectl(['get', 'hostnameclaims', name]);
      expect(table.code).toBe(0);
      const [header, row] = table.stdout.trim().split('\n');
      expect(header?.trim().split(/\s+/)).toEqual(['NAME', 'NAMESPACE', 'CUSTOMDOMAIN', 'AGE']);
      expect(row?.trim().split(/\s+/).slice(0, 3)).toEqual([name, 'shop', 'www']);
    } finally {
      await kube().custom.deleteClusterCustomObject({ ...hostnameClaimApi, name });
    }
  });
});
