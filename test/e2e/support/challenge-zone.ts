/**
 * The platform's DNS-01 challenge zone for e2e files (docs/customdomains.md, "Certificates before
 * the move"): Knot DNS serving `zone` and taking TSIG-signed RFC 2136 updates signed with `key`,
 * and a BIND 9 resolver that answers from the stack's DNS server (pebble-challtestsrv) and forwards
 * `zone` to Knot, so a CA that resolves through it follows a customer's `_acme-challenge` CNAME into
 * the zone. Both run from the tools cache on free loopback ports; `stopChallengeZone` stops them.
 */
import path from 'node:path';
import type { TsigKey } from '../../../src/dns/dynamic-update.js';
import {
  BIND_RESOLVER,
  startBindResolver,
  type DnsServerAddress,
} from '../../../src/sandbox/bind-resolver.js';
import { KNOT, startKnot } from '../../../src/sandbox/knot.js';
import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { pickFreePorts } from '../../../src/sandbox/ports.js';
import { stopProcess } from '../../../src/sandbox/processes.js';
import { dns, sandbox, unique } from './cluster.js';

/** Where the zone's authoritative server and the resolver in front of it listen. */
export interface ChallengeZone {
  /** Knot: the server RFC 2136 updates go to. */
  readonly zoneServer: DnsServerAddress;
  /** BIND: the resolver a CA validates DNS-01 through. */
  readonly resolver: DnsServerAddress;
}

/**
 * Starts Knot with `zone` updatable by `key`, then the BIND resolver in front of it; resolves once
 * BIND answers a name the stack's DNS server serves (a probe A record this adds).
 *
 * @throws Error when either process does not come up (its log is under the sandbox's logs/)
 */
export async function startChallengeZone(zone: string, key: TsigKey): Promise<ChallengeZone> {
  const paths = sandboxPaths(sandbox.sandboxDir);
  const ports = await pickFreePorts({ knot: 'tcp+udp', bind: 'tcp+udp' });
  const zoneServer = (
    await startKnot(paths, path.join(sandbox.toolsBinDir, 'knotd'), ports.knot, key, [
      { name: zone, updatable: true },
    ])
  ).server;
  const [dnsHost = '127.0.0.1', dnsPort = '53'] = sandbox.dnsServer.split(':');
  const probeHost = `${unique('probe')}.portico.test`;
  await dns.addA(probeHost, ['192.0.2.10']);
  const bind = await startBindResolver(
    paths,
    path.join(sandbox.toolsBinDir, 'named'),
    ports.bind,
    {
      defaultServer: { host: dnsHost, port: Number(dnsPort) },
      forwardZones: [{ zone, server: zoneServer }],
    },
    { host: probeHost, address: '192.0.2.10' },
  );
  return { zoneServer, resolver: bind.server };
}

/** Stops the resolver and Knot started by `startChallengeZone` (either may be absent). */
export async function stopChallengeZone(): Promise<void> {
  const paths = sandboxPaths(sandbox.sandboxDir);
  await stopProcess(paths, BIND_RESOLVER);
  await stopProcess(paths, KNOT);
}
