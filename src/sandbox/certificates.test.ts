import { X509Certificate } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { generateSandboxCertificates } from './certificates.js';

describe('generateSandboxCertificates', () => {
  it('signs the serving and client certificates with the right CA, names and usages', async () => {
    const certs = await generateSandboxCertificates();
    const clusterCa = new X509Certificate(certs.clusterCa.certPem);
    const pebbleCa = new X509Certificate(certs.pebbleCa.certPem);
    const apiServer = new X509Certificate(certs.apiServer.certPem);
    const admin = new X509Certificate(certs.admin.certPem);
    const pebble = new X509Certificate(certs.pebbleServing.certPem);

    expect(clusterCa.ca).toBe(true);
    expect(apiServer.verify(clusterCa.publicKey)).toBe(true);
    expect(admin.verify(clusterCa.publicKey)).toBe(true);
    expect(pebble.verify(pebbleCa.publicKey)).toBe(true);
    expect(pebble.verify(clusterCa.publicKey)).toBe(false);

    expect(apiServer.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(apiServer.checkHost('localhost')).toBe('localhost');
    expect(pebble.checkHost('pebble')).toBe('pebble');
    expect(admin.subject).toContain('CN=portico-admin');
    expect(admin.subject).toContain('O=system:masters');
    expect(admin.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    expect(apiServer.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(certs.serviceAccount.publicKeyPem).toContain('BEGIN PUBLIC KEY');
  });
});
