/**
 * BIND 9 (Debian's `named`, linked into the tools' bin directory by scripts/install-tools.sh) as a
 * resolver in front of the sandbox's DNS: what a CA's validation server sees on the Internet, where a
 * CNAME at `_acme-challenge.<hostname>` in the customer's zone leads into the platform's challenge
 * zone on another server. Names in the challenge zone are forwarded to its authoritative server (Knot),
 * every other name to pebble-challtestsrv, and the CNAME between them is followed by the resolver.
 * Nothing is cached for more than a second, so a record a test changes is seen at once.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Resolver } from 'node:dns/promises';

import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { waitUntilReady } from './readiness.js';

export const BIND_RESOLVER = 'named';

/** An address and port (IPv4, loopback in the sandbox). */
export interface DnsServerAddress {
  readonly host: string;
  readonly port: number;
}

/** Where the resolver sends questions. */
export interface BindResolverUpstreams {
  /** Every name not in a forward zone (the sandbox's pebble-challtestsrv). */
  readonly defaultServer: DnsServerAddress;
  /** Zones forwarded elsewhere, e.g. the challenge zone to Knot. */
  readonly forwardZones: ReadonlyArray<{ readonly zone: string; readonly server: DnsServerAddress }>;
}

function forwarder(server: DnsServerAddress): string {
  return `${server.host} port ${server.port};`;
}

/**
 * named.conf for a loopback resolver on `port`: recursion through forwarders only, no DNSSEC
 * validation (the sandbox's zones are unsigned), caches capped at 1 s, no control channel.
 */
export function bindResolverConfig(dir: string, port: number, upstreams: BindResolverUpstreams): string {
  const zones = upstreams.forwardZones.map(
    ({ zone, server }) =>
      `zone "${zone}" { type forward; forward only; forwarders { ${forwarder(server)} }; };`,
  );
  return [
    'options {',
    `  directory "${dir}";`,
    `  pid-file "${path.join(dir, 'named.pid')}";`,
    `  session-keyfile "${path.join(dir, 'session.key')}";`,
    `  listen-on port ${port} { 127.0.0.1; };`,
    '  listen-on-v6 { none; };',
    '  recursion yes;',
    '  allow-query { 127.0.0.1; };',
    '  allow-recursion { 127.0.0.1; };',
    `  forwarders { ${forwarder(upstreams.defaultServer)} };`,
    '  forward only;',
    '  dnssec-validation no;',
    '  max-cache-ttl 1;',
    '  max-ncache-ttl 1;',
    '};',
    'controls { };',
    ...zones,
    '',
  ].join('\n');
}

/**
 * Writes `<sandbox>/named/named.conf`, starts named in the foreground (`-g`, its log in the
 * sandbox's logs) and waits until it answers an A query for `probe.host` with `probe.address`
 * (a name the default server holds).
 *
 * @param binary absolute path of named
 * @param port DNS port (UDP and TCP) on 127.0.0.1
 * @throws ComponentStartError when named exits or does not answer within 20 s
 */
export async function startBindResolver(
  paths: SandboxPaths,
  binary: string,
  port: number,
  upstreams: BindResolverUpstreams,
  probe: { readonly host: string; readonly address: string },
  name: string = BIND_RESOLVER,
): Promise<{ process: StartedProcess; server: DnsServerAddress }> {
  const dir = path.join(paths.dir, name);
  await mkdir(dir, { recursive: true });
  const configPath = path.join(dir, 'named.conf');
  await writeFile(configPath, bindResolverConfig(dir, port, upstreams));
  const proc = await startDetached(paths, { name, command: binary, args: ['-g', '-4', '-c', configPath] });
  const resolver = new Resolver({ timeout: 1000, tries: 1 });
  resolver.setServers([`127.0.0.1:${port}`]);
  await waitUntilReady(
    proc,
    async () => {
      try {
        const answer = await resolver.resolve4(probe.host);
        return answer.includes(probe.address) || `A ${probe.host} answered ${answer.join(', ')}`;
      } catch (err: unknown) {
        return `A ${probe.host}: ${err instanceof Error ? err.message : String(err)}`;
      }
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  return { process: proc, server: { host: '127.0.0.1', port } };
}
