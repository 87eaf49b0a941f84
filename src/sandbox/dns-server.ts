/**
 * The sandbox's DNS: pebble-challtestsrv as an authoritative mock DNS server with an HTTP management
 * API. Only the DNS listener and the management API run (the HTTP-01, HTTPS-01, TLS-ALPN-01 and DoH
 * challenge listeners are disabled), and the default A/AAAA answers are cleared so that a name
 * nobody set up has no address, exactly like a real "no record yet".
 *
 * Management API (POST, JSON bodies): /add-a, /clear-a, /add-aaaa, /clear-aaaa, /set-cname,
 * /clear-cname, /add-caa, /clear-caa, /set-txt, /clear-txt, /set-servfail, /clear-servfail.
 */
import { Resolver } from 'node:dns/promises';

import { ManagementApiError } from './errors.js';
import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { waitUntilReady } from './readiness.js';

export const DNS_SERVER = 'pebble-challtestsrv';

/** Ports of the DNS server. */
export interface DnsServerPorts {
  /** DNS, UDP and TCP. */
  readonly dnsPort: number;
  /** The HTTP management API. */
  readonly managementPort: number;
}

/** pebble-challtestsrv's command-line flags. */
export function dnsServerArgs(ports: DnsServerPorts): string[] {
  return [
    `-dnsserver=127.0.0.1:${ports.dnsPort}`,
    `-management=127.0.0.1:${ports.managementPort}`,
    '-http01=',
    '-https01=',
    '-tlsalpn01=',
    '-doh=',
    '-defaultIPv4=',
    '-defaultIPv6=',
  ];
}

/** A client of pebble-challtestsrv's management API. */
export class DnsManagementClient {
  /** @param baseUrl `http://127.0.0.1:<management port>` */
  constructor(readonly baseUrl: string) {}

  /**
   * POSTs `body` as JSON to `path`.
   *
   * @throws ManagementApiError when the server answers other than 200 or cannot be reached
   */
  async post(path: string, body: Readonly<Record<string, unknown>>): Promise<void> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
    } catch (err: unknown) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new ManagementApiError(`${DNS_SERVER}: POST ${this.baseUrl}${path} failed: ${reason}`);
    }
    if (response.status !== 200) {
      const text = (await response.text()).trim();
      throw new ManagementApiError(
        `${DNS_SERVER}: POST ${this.baseUrl}${path} answered ${response.status}${text === '' ? '' : `: ${text}`}`,
      );
    }
  }

  /** Answers A queries for `host` with `addresses` (IPv4, dotted). */
  addA(host: string, addresses: readonly string[]): Promise<void> {
    return this.post('/add-a', { host, addresses });
  }

  /** Makes `host` a CNAME (alias) of `target`. */
  setCname(host: string, target: string): Promise<void> {
    return this.post('/set-cname', { host, target });
  }
}

/**
 * Starts pebble-challtestsrv, waits for its management API, sets `initialA` (host → IPv4) and waits
 * until the DNS listener answers an A query for that host with it.
 *
 * @param binary absolute path of the pebble-challtestsrv binary
 * @throws ComponentStartError when it exits or does not answer within 20 s
 */
export async function startDnsServer(
  paths: SandboxPaths,
  binary: string,
  ports: DnsServerPorts,
  initialA: { readonly host: string; readonly address: string },
): Promise<{ process: StartedProcess; client: DnsManagementClient }> {
  const proc = await startDetached(paths, { name: DNS_SERVER, command: binary, args: dnsServerArgs(ports) });
  const client = new DnsManagementClient(`http://127.0.0.1:${ports.managementPort}`);
  await waitUntilReady(
    proc,
    async () => {
      try {
        await client.addA(initialA.host, [initialA.address]);
        return true;
      } catch (err: unknown) {
        return err instanceof Error ? err.message : String(err);
      }
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  await waitUntilReady(proc, dnsProbe(`127.0.0.1:${ports.dnsPort}`, initialA.host, initialA.address), {
    timeoutMs: 20_000,
    intervalMs: 100,
  });
  return { process: proc, client };
}

/**
 * A probe that is true when the DNS server at `server` (`host:port`) answers an A query for `host`
 * with `address` among its answers.
 */
export function dnsProbe(server: string, host: string, address: string): () => Promise<true | string> {
  const resolver = new Resolver({ timeout: 1000, tries: 1 });
  resolver.setServers([server]);
  return async () => {
    try {
      const answer = await resolver.resolve4(host);
      return answer.includes(address) || `A ${host} answered ${answer.join(', ')}, not ${address}`;
    } catch (err: unknown) {
      return `A ${host} failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  };
}
