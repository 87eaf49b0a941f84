/**
 * The sandbox's apps zone (docs/customdomains.md, "The auto-generated subdomain"): Knot DNS serves
 * `apps.portico.test` and takes RFC 2136 updates signed with a TSIG key made for this sandbox, and a
 * BIND 9 resolver answers from the stack's DNS server (pebble-challtestsrv) and forwards the apps
 * zone to Knot, so that the sandbox's Pebble, which resolves through it, validates the DNS-01
 * challenge of the wildcard `*.apps.portico.test` the operator writes into Knot. Started by
 * `sandbox up` with a data plane whose module says `appsDomain` (Contour, Traefik); the e2e stack leaves it out (the files
 * that need it start their own: test/e2e/support/challenge-zone.ts). Development only.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { TsigKey } from '../dns/dynamic-update.js';
import { startBindResolver, type DnsServerAddress } from './bind-resolver.js';
import { startKnot } from './knot.js';
import type { SandboxPaths } from './paths.js';

/** The sandbox's apps domain: every example Project is served at `<namespace>.apps.portico.test`. */
export const SANDBOX_APPS_DOMAIN = 'apps.portico.test';

export interface SandboxAppsZone {
  /** Knot: where the operator's RFC 2136 updates go. */
  readonly zoneServer: DnsServerAddress;
  /** BIND: the DNS server Pebble validates through. */
  readonly resolver: DnsServerAddress;
  readonly key: TsigKey;
}

/**
 * Starts Knot with the apps zone, then BIND in front of it and of `dnsServer`; resolves once BIND
 * answers `probe` (a name the stack's DNS server serves).
 *
 * @param binDir the tools' bin directory (knotd and named: install-tools.sh `--knot`)
 * @param dnsServer `host:port` of the stack's DNS server
 * @throws ComponentStartError when either process does not come up (its log is under logs/)
 */
export async function startAppsZone(
  paths: SandboxPaths,
  binDir: string,
  ports: { readonly knot: number; readonly bind: number },
  dnsServer: string,
  probe: { readonly host: string; readonly address: string },
): Promise<SandboxAppsZone> {
  const key: TsigKey = { name: 'portico-apps.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
  const zoneServer = (
    await startKnot(paths, path.join(binDir, 'knotd'), ports.knot, key, [
      { name: SANDBOX_APPS_DOMAIN, updatable: true },
    ])
  ).server;
  const [host = '127.0.0.1', port = '53'] = dnsServer.split(':');
  const bind = await startBindResolver(
    paths,
    path.join(binDir, 'named'),
    ports.bind,
    {
      defaultServer: { host, port: Number(port) },
      forwardZones: [{ zone: SANDBOX_APPS_DOMAIN, server: zoneServer }],
    },
    probe,
  );
  return { zoneServer, resolver: bind.server, key };
}
