/**
 * Knot DNS (Debian's `knotd`, linked into the tools' bin directory by scripts/install-tools.sh) as the
 * authoritative server of a platform's DNS-01 challenge zone: zones on loopback, each either open to
 * RFC 2136 updates signed with one TSIG key or refusing them, no zone file written back (the
 * journal holds the changes).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Resolver } from 'node:dns/promises';

import type { TsigKey } from '../dns/dynamic-update.js';
import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { waitUntilReady } from './readiness.js';

export const KNOT = 'knotd';

/** One zone Knot serves. */
export interface KnotZone {
  /** The zone's apex, e.g. `acme-challenges.portico.test`. */
  readonly name: string;
  /** Whether the TSIG key may update it; a zone without is served but refuses every update. */
  readonly updatable: boolean;
}

/** The zone file of `zone`: an SOA and an NS with its address (RFC 1035 §5). */
export function knotZoneFile(zone: string): string {
  return [
    `$ORIGIN ${zone}.`,
    '$TTL 60',
    `@ SOA ns.${zone}. hostmaster.${zone}. 1 3600 600 86400 60`,
    `@ NS ns.${zone}.`,
    'ns A 127.0.0.1',
    '',
  ].join('\n');
}

/**
 * knotd's configuration (Knot DNS 3.2 YAML-like syntax): listen on 127.0.0.1@`port`, the key, an ACL
 * allowing updates signed by it, and the zones. Zone files are never written back (the journal keeps
 * the updates).
 */
export function knotConfig(dir: string, port: number, key: TsigKey, zones: readonly KnotZone[]): string {
  const zoneLines = zones.flatMap((zone) =>
    zone.updatable ? [`  - domain: ${zone.name}`, '    acl: challenge-update'] : [`  - domain: ${zone.name}`],
  );
  return [
    'server:',
    `    rundir: "${dir}"`,
    `    listen: 127.0.0.1@${port}`,
    'database:',
    `    storage: "${path.join(dir, 'db')}"`,
    'key:',
    `  - id: ${key.name.replace(/\.$/, '')}`,
    `    algorithm: ${key.algorithm}`,
    `    secret: ${key.secret.toString('base64')}`,
    'acl:',
    '  - id: challenge-update',
    `    key: ${key.name.replace(/\.$/, '')}`,
    '    action: update',
    'template:',
    '  - id: default',
    `    storage: "${path.join(dir, 'zones')}"`,
    '    file: "%s.zone"',
    '    zonefile-sync: -1',
    '    zonefile-load: whole',
    '    journal-content: changes',
    'zone:',
    ...zoneLines,
    '',
  ].join('\n');
}

/**
 * Writes the configuration and zone files under `<sandbox>/knot`, starts knotd and waits until it
 * answers the first zone's SOA.
 *
 * @param binary absolute path of knotd
 * @param port DNS port (UDP and TCP) on 127.0.0.1
 * @throws ComponentStartError when knotd exits or does not answer within 20 s
 */
export async function startKnot(
  paths: SandboxPaths,
  binary: string,
  port: number,
  key: TsigKey,
  zones: readonly KnotZone[],
): Promise<{ process: StartedProcess; server: { host: string; port: number } }> {
  const dir = path.join(paths.dir, 'knot');
  await mkdir(path.join(dir, 'zones'), { recursive: true });
  await mkdir(path.join(dir, 'db'), { recursive: true });
  const configPath = path.join(dir, 'knot.conf');
  await writeFile(configPath, knotConfig(dir, port, key, zones));
  for (const zone of zones)
    await writeFile(path.join(dir, 'zones', `${zone.name}.zone`), knotZoneFile(zone.name));
  const proc = await startDetached(paths, { name: KNOT, command: binary, args: ['--config', configPath] });
  const resolver = new Resolver({ timeout: 1000, tries: 1 });
  resolver.setServers([`127.0.0.1:${port}`]);
  const first = zones[0];
  if (first !== undefined) {
    await waitUntilReady(
      proc,
      async () => {
        try {
          await resolver.resolveSoa(first.name);
          return true;
        } catch (err: unknown) {
          return `SOA ${first.name}: ${err instanceof Error ? err.message : String(err)}`;
        }
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
  }
  return { process: proc, server: { host: '127.0.0.1', port } };
}
