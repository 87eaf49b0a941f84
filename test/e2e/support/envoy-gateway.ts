/**
 * Envoy Gateway in the e2e stack, and what it would push to Envoy.
 *
 * Lifecycle: the stack's default data plane is Contour (global-setup.ts), so a test file that needs
 * Envoy Gateway starts it with {@link startStackEnvoyGateway} in its `beforeAll` (the sandbox's own
 * start: src/data-planes/envoy-gateway/sandbox-process.ts; its pid file in the stack's directory, so `sandboxDown` stops
 * it too) and stops it in `afterAll`. Files run one at a time (vitest.config.ts), so no two run it at
 * once, and the files that do not need it pay nothing.
 *
 * Evidence: Envoy Gateway's xDS server, read as an Envoy would read it. {@link withAdsStream} opens an
 * Aggregated Discovery Service stream (envoy.service.discovery.v3, State of the World) to
 * 127.0.0.1:18000 with the client certificate `envoy-gateway certgen` made for Envoy, names the
 * Gateway's IR key (`<namespace>/<name>`) as its node's cluster, the way Envoy Gateway's bootstrap
 * does, and decodes the DiscoveryResponses with Envoy's own .proto files (from @grpc/grpc-js-xds, as
 * src/ratelimit/protocol.ts). Envoy Gateway's cache runs in ADS mode, where a request that names
 * resources is answered only when it names every resource of its type in the snapshot: RDS and SDS
 * requests name all that the Listeners refer to, as Envoy's do ({@link xdsSecrets}). `egctl x
 * translate` would not do: v1.9.1's translate does not load ListenerSets, which carry the
 * certificates. Port 18000 is a constant of
 * Envoy Gateway; a second stack's Envoy Gateway on the same host could hold it, and then the stream
 * fails its TLS handshake (each stack's certgen makes its own CA) instead of reading another stack.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { existsSync } from 'node:fs';

import { credentials, makeGenericClientConstructor, type ClientDuplexStream } from '@grpc/grpc-js';
import protobuf from 'protobufjs';

import { ensureNamespace } from '../../../src/sandbox/cluster.js';
import {
  ENVOY_GATEWAY,
  ENVOY_GATEWAY_NAME,
  ENVOY_GATEWAY_NAMESPACE,
  SANDBOX_GATEWAY,
  applyPlatformGateway,
  gatewayParentRefsArg,
  envoyGatewayDir,
  installEnvoyGatewayCrds,
  startEnvoyGateway,
  type PlatformGateway,
} from '../../../src/data-planes/envoy-gateway/sandbox-process.js';
import type { Kubectl } from '../../../src/sandbox/kubectl.js';
import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { stopProcess } from '../../../src/sandbox/processes.js';
import { sandbox } from './cluster.js';
import { freePort } from './stack-controller.js';

const paths = sandboxPaths(sandbox.sandboxDir);

/** Envoy Gateway's xDS server: a constant address and port in v1.9.1 (bootstrap.DefaultXdsServerPort). */
export const ENVOY_GATEWAY_XDS_ADDR = '127.0.0.1:18000';

/** The stack's kubectl. */
export function stackKubectl(): Kubectl {
  return { binary: path.join(sandbox.toolsBinDir, 'kubectl'), kubeconfig: sandbox.kubeconfig };
}

/** A running Envoy Gateway of the stack. */
export interface StackEnvoyGateway {
  readonly adminUrl: string;
  readonly gateway: PlatformGateway;
}

/**
 * Installs Envoy Gateway's and Gateway API's experimental CRDs on the stack's API server (the
 * routing tests may have applied Gateway API's standard channel since), starts Envoy Gateway, and
 * applies the sandbox's GatewayClass and Gateway; resolves once Envoy Gateway accepted both.
 */
export async function startStackEnvoyGateway(): Promise<StackEnvoyGateway> {
  await stopProcess(paths, ENVOY_GATEWAY); // a leftover of an interrupted run
  const kubectl = stackKubectl();
  await installEnvoyGatewayCrds(kubectl, path.join(sandbox.toolsBinDir, 'envoy-gateway-crds.yaml'));
  await ensureNamespace(kubectl, ENVOY_GATEWAY_NAMESPACE);
  const started = await startEnvoyGateway(
    paths,
    path.join(sandbox.toolsBinDir, 'envoy-gateway'),
    kubectl,
    await freePort(),
  );
  await applyPlatformGateway(kubectl, paths, SANDBOX_GATEWAY);
  return { adminUrl: started.adminUrl, gateway: SANDBOX_GATEWAY };
}

/**
 * The flags of an operator of a file's own routing to the stack's Envoy Gateway: gateway mode on
 * the sandbox's Gateway, the acknowledgement on, Envoy Gateway named in the messages, Contour's
 * rate-limit attachment off (no Contour reads its objects here).
 */
export const ENVOY_GATEWAY_OPERATOR_FLAGS: Readonly<Record<string, string>> = {
  '--routing-mode': 'gateway',
  '--gateway-parent-refs': gatewayParentRefsArg(SANDBOX_GATEWAY),
  '--data-plane-acknowledgement': 'true',
  '--data-plane': 'envoy-gateway',
  '--data-plane-name': ENVOY_GATEWAY_NAME,
  '--contour-attachment': 'false',
};

/** Stops the stack's Envoy Gateway (SIGTERM, SIGKILL after 5 s). */
export async function stopStackEnvoyGateway(): Promise<void> {
  await stopProcess(paths, ENVOY_GATEWAY);
}

/** xDS type URLs of the resources the tests read. */
export const XDS_TYPE = {
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  routeConfiguration: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  secret: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret',
  endpoint: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
} as const;

/** The .proto files whose messages the responses carry (their imports are loaded with them). */
const PROTO_FILES = [
  'envoy/service/discovery/v3/ads.proto',
  'envoy/config/listener/v3/listener.proto',
  'envoy/config/route/v3/route.proto',
  'envoy/config/cluster/v3/cluster.proto',
  'envoy/config/endpoint/v3/endpoint.proto',
  'envoy/extensions/transport_sockets/tls/v3/tls.proto',
  'envoy/extensions/transport_sockets/tls/v3/secret.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
  'envoy/extensions/filters/http/ratelimit/v3/rate_limit.proto',
  'envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto',
  'envoy/extensions/upstreams/http/v3/http_protocol_options.proto',
];

/**
 * Envoy's complete API protos, as @grpc/grpc-js-xds (a devDependency) ships them: the service keeps
 * only a trimmed copy of the rate-limit ones in proto/.
 */
function envoyApiIncludeDirs(): string[] {
  const require = createRequire(import.meta.url);
  const root = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  return ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(root, 'deps', d));
}

let protoRoot: protobuf.Root | undefined;

/** Envoy's API as a protobufjs Root, field names as in the .proto files (loaded once, about 1 s). */
function envoyProtos(): protobuf.Root {
  if (protoRoot !== undefined) return protoRoot;
  const dirs = envoyApiIncludeDirs();
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    for (const dir of dirs) {
      const file = path.join(dir, target);
      if (existsSync(file)) return file;
    }
    // protobufjs's bundled google/protobuf/*.proto
    const require = createRequire(import.meta.url);
    return path.join(path.dirname(require.resolve('protobufjs/package.json')), target);
  };
  root.loadSync(PROTO_FILES, { keepCase: true });
  root.resolveAll();
  protoRoot = root;
  return root;
}

/** One xDS resource as protobufjs renders it in JSON form: an `Any` with `@type` and the fields. */
export type XdsResource = Record<string, unknown> & { '@type': string; name?: string };

/** The certificates Envoy uses to talk to this stack's Envoy Gateway (certgen's `envoy` ones). */
async function envoyClientCredentials(): Promise<ReturnType<typeof credentials.createSsl>> {
  const dir = path.join(envoyGatewayDir(paths), 'certs', 'envoy');
  const [ca, key, cert] = await Promise.all(
    ['ca.crt', 'tls.key', 'tls.crt'].map((f) => readFile(path.join(dir, f))),
  );
  return credentials.createSsl(ca, key, cert);
}

/** The DiscoveryResponse message type and the generic ADS client constructor. */
function adsClient(): {
  response: protobuf.Type;
  Client: ReturnType<typeof makeGenericClientConstructor>;
} {
  const root = envoyProtos();
  const request = root.lookupType('envoy.service.discovery.v3.DiscoveryRequest');
  const response = root.lookupType('envoy.service.discovery.v3.DiscoveryResponse');
  const Client = makeGenericClientConstructor(
    {
      StreamAggregatedResources: {
        path: '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
        requestStream: true,
        responseStream: true,
        requestSerialize: (m: Record<string, unknown>) =>
          Buffer.from(request.encode(request.fromObject(m)).finish()),
        requestDeserialize: (b: Buffer) => request.decode(b),
        responseSerialize: (m: protobuf.Message) => Buffer.from(response.encode(m).finish()),
        responseDeserialize: (b: Buffer) => response.decode(b),
      },
    },
    'AggregatedDiscoveryService',
  );
  return { response, Client };
}

/** One ADS stream to Envoy Gateway, as one Envoy node: ask for a type, get its next response. */
export interface AdsStream {
  /** Sends a DiscoveryRequest for `typeUrl` and `resourceNames` without waiting for its response. */
  send(typeUrl: string, resourceNames?: string[]): void;
  /** The resources of the last response of `typeUrl` received on this stream, if any. */
  received(typeUrl: string): XdsResource[] | undefined;
  /**
   * Sends a DiscoveryRequest for `typeUrl` and `resourceNames` (none: a wildcard request) and returns
   * the resources of the next DiscoveryResponse of that type.
   *
   * @throws Error when no response of that type arrives within the stream's timeout, or the stream fails
   */
  request(typeUrl: string, resourceNames?: string[]): Promise<XdsResource[]>;
}

/**
 * Runs `use` on one Aggregated Discovery Service stream (State of the World) of a node of the
 * Gateway `gateway` (node cluster `<namespace>/<name>`), then closes the stream.
 *
 * One stream, as an Envoy keeps one: the Listeners, then the RouteConfigurations or Secrets they
 * name, in one conversation with the node's snapshot. Should the snapshot change between the two
 * (another domain's certificate added), the named request goes unanswered and times out: callers
 * that can meet that ask again (waitFor).
 *
 * @param timeoutMs how long each request waits for its response, in milliseconds
 */
export async function withAdsStream<T>(
  use: (stream: AdsStream) => Promise<T>,
  gateway: PlatformGateway = SANDBOX_GATEWAY,
  timeoutMs = 10_000,
): Promise<T> {
  const { response, Client } = adsClient();
  const client = new Client(ENVOY_GATEWAY_XDS_ADDR, await envoyClientCredentials(), {
    // The server's certificate names the Service envoy-gateway (certgen).
    'grpc.ssl_target_name_override': 'envoy-gateway',
    'grpc.default_authority': 'envoy-gateway',
  });
  const stream = (
    client as unknown as {
      StreamAggregatedResources: () => ClientDuplexStream<Record<string, unknown>, protobuf.Message>;
    }
  ).StreamAggregatedResources();
  /** Waiters by type URL; a response no one waits for is dropped. */
  const waiting = new Map<string, { resolve: (r: XdsResource[]) => void; reject: (e: Error) => void }>();
  /** The resources of the last response of each type. */
  const last = new Map<string, XdsResource[]>();
  let failure: Error | undefined;
  stream.on('data', (message: protobuf.Message) => {
    const object = response.toObject(message, {
      json: true,
      longs: String,
      enums: String,
      bytes: String,
    }) as {
      type_url?: string;
      resources?: XdsResource[];
    };
    last.set(object.type_url ?? '', object.resources ?? []);
    const waiter = waiting.get(object.type_url ?? '');
    if (waiter === undefined) return;
    waiting.delete(object.type_url ?? '');
    waiter.resolve(object.resources ?? []);
  });
  stream.on('error', (err: Error) => {
    failure = new Error(`xDS stream to ${ENVOY_GATEWAY_XDS_ADDR}: ${err.message}`);
    for (const waiter of waiting.values()) waiter.reject(failure);
    waiting.clear();
  });
  let first = true;
  const send = (typeUrl: string, resourceNames: string[] = []): void => {
    stream.write({
      // Envoy sends its node on the first request of a stream; Envoy Gateway reads it from there.
      ...(first ? { node: { id: 'portico-e2e', cluster: `${gateway.namespace}/${gateway.name}` } } : {}),
      type_url: typeUrl,
      resource_names: resourceNames,
    });
    first = false;
  };
  const ads: AdsStream = {
    send,
    received: (typeUrl) => last.get(typeUrl),
    request(typeUrl, resourceNames = []) {
      if (failure !== undefined) return Promise.reject(failure);
      return new Promise<XdsResource[]>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(typeUrl);
          reject(
            new Error(
              `xDS ${typeUrl} ${JSON.stringify(resourceNames)}: no DiscoveryResponse within ${timeoutMs} ms`,
            ),
          );
        }, timeoutMs);
        waiting.set(typeUrl, {
          resolve: (r) => {
            clearTimeout(timer);
            resolve(r);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        send(typeUrl, resourceNames);
      });
    },
  };
  try {
    return await use(ads);
  } finally {
    stream.cancel();
    client.close();
  }
}

/**
 * The resources of `typeUrl` in the first DiscoveryResponse Envoy Gateway sends a node of the
 * Gateway `gateway`, for `resourceNames` (none: every resource, for Listener and Cluster).
 *
 * Envoy Gateway's cache runs in ADS mode (go-control-plane `NewSnapshotCache(ads=true)`): a request
 * naming resources is answered only when it names EVERY resource of that type in the snapshot
 * (`createResponse`: "ADS mode: not responding to request" otherwise, and the request is dropped).
 * For RouteConfiguration ask for every name the Listeners carry; for Secrets use {@link xdsSecrets}.
 *
 * @param timeoutMs how long to wait for the response, in milliseconds
 * @throws Error when no response arrives in time or the stream fails (TLS, connection)
 */
export async function xdsResources(
  typeUrl: string,
  resourceNames: string[] = [],
  gateway: PlatformGateway = SANDBOX_GATEWAY,
  timeoutMs = 10_000,
): Promise<XdsResource[]> {
  return withAdsStream((ads) => ads.request(typeUrl, resourceNames), gateway, timeoutMs);
}

/**
 * Every SDS secret name an xDS resource refers to: the `name` of each `SdsSecretConfig` (fields
 * `tls_certificate_sds_secret_configs`, `validation_context_sds_secret_config`, ...) anywhere in it,
 * transport sockets of filter chains and clusters included.
 */
export function sdsSecretNames(resource: unknown): string[] {
  const names = new Set<string>();
  const walk = (value: unknown, key: string): void => {
    if (Array.isArray(value)) {
      for (const v of value) walk(v, key);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    const object = value as Record<string, unknown>;
    if (/sds_secret_configs?$/.test(key) && typeof object.name === 'string') names.add(object.name);
    for (const [k, v] of Object.entries(object)) walk(v, k);
  };
  walk(resource, '');
  return [...names];
}

/**
 * The Secrets Envoy Gateway serves a node of `gateway`, read the way Envoy reads them: on one
 * stream, the Listeners and Clusters first, then one SDS request naming every secret they refer to.
 * A request naming fewer than the snapshot holds gets no answer at all from Envoy Gateway's ADS-mode
 * cache (see {@link xdsResources}), which is why a request for one secret by name stalls as soon as
 * the Gateway carries a second certificate (another domain's ListenerSet).
 *
 * @throws Error when a response does not arrive in time or the stream fails
 */
export async function xdsSecrets(gateway: PlatformGateway = SANDBOX_GATEWAY): Promise<XdsResource[]> {
  return withAdsStream(async (ads) => {
    // A wildcard Cluster request gets no response while the snapshot has no Cluster (its version is
    // the request's empty one), so it is not awaited: the server answers an ADS stream's requests in
    // the order they came (one ordered response channel per stream, sotw/v3/ads.go), so a Cluster
    // response it had to give has arrived before the Listeners' response.
    ads.send(XDS_TYPE.cluster);
    const listeners = await ads.request(XDS_TYPE.listener);
    const clusters = ads.received(XDS_TYPE.cluster) ?? [];
    const names = [...new Set([...sdsSecretNames(listeners), ...sdsSecretNames(clusters)])];
    if (names.length === 0) return [];
    return ads.request(XDS_TYPE.secret, names);
  }, gateway);
}

/**
 * A serial as uppercase hex without separators or leading zeros: Node's X509Certificate prints
 * whole bytes (a leading 0 nibble kept), the status may not.
 */
export function normalSerial(serial: string | undefined): string {
  return (serial ?? '').replaceAll(':', '').toUpperCase().replace(/^0+/, '');
}

/** A listener's filter chain, as far as the tests read it. */
export interface FilterChain {
  name?: string;
  filter_chain_match?: { server_names?: string[] };
  transport_socket?: {
    typed_config?: {
      common_tls_context?: { tls_certificate_sds_secret_configs?: { name: string }[] };
    };
  };
  filters?: { name: string; typed_config?: { rds?: { route_config_name?: string } } }[];
}

/** The filter chains, in every listener Envoy Gateway serves the Gateway, that match SNI `hostname`. */
export async function filterChainsFor(hostname: string): Promise<FilterChain[]> {
  const listeners = (await xdsResources(XDS_TYPE.listener)) as (XdsResource & {
    filter_chains?: FilterChain[];
  })[];
  return listeners.flatMap((l) =>
    (l.filter_chains ?? []).filter((c) => c.filter_chain_match?.server_names?.includes(hostname)),
  );
}

/** The SDS secret a filter chain's TLS context names. */
export function sdsSecretName(chain: FilterChain): string | undefined {
  return chain.transport_socket?.typed_config?.common_tls_context?.tls_certificate_sds_secret_configs?.[0]
    ?.name;
}

/** The serial of the leaf certificate in SDS secret `name`, as Envoy Gateway serves it. */
export async function sdsSerial(name: string): Promise<string | undefined> {
  // Envoy Gateway answers an SDS request only when it names every secret of the snapshot (other
  // domains' certificates included): xdsSecrets asks as Envoy does, and the one wanted is picked here.
  const secret = (
    (await xdsSecrets()) as (XdsResource & {
      tls_certificate?: { certificate_chain?: { inline_bytes?: string } };
    })[]
  ).find((s) => s.name === name);
  const bytes = secret?.tls_certificate?.certificate_chain?.inline_bytes;
  return bytes === undefined ? undefined : new X509Certificate(Buffer.from(bytes, 'base64')).serialNumber;
}

/** An Envoy route, as far as the tests read it. */
export interface XdsRoute {
  name?: string;
  match?: { prefix?: string; path_separated_prefix?: string };
  route?: { cluster?: string };
  redirect?: { host_redirect?: string; scheme_redirect?: string; response_code?: string };
}

/**
 * The routes of the virtual hosts for `hostname` in the RouteConfigurations the listeners name, read
 * on one stream (Listeners, then every RouteConfiguration they name: Envoy Gateway answers a named
 * request only when it names all of the snapshot's).
 */
export async function routesFor(hostname: string): Promise<{ routeConfig: string; routes: XdsRoute[] }[]> {
  return withAdsStream(async (ads) => {
    const listeners = (await ads.request(XDS_TYPE.listener)) as (XdsResource & {
      filter_chains?: FilterChain[];
      default_filter_chain?: FilterChain;
    })[];
    const chains = listeners.flatMap((l) => [
      ...(l.filter_chains ?? []),
      ...(l.default_filter_chain ? [l.default_filter_chain] : []),
    ]);
    const names = new Set(
      chains
        .flatMap((chain) => chain.filters ?? [])
        .map((f) => f.typed_config?.rds?.route_config_name)
        .filter((n): n is string => n !== undefined),
    );
    if (names.size === 0) return [];
    const configs = (await ads.request(XDS_TYPE.routeConfiguration, [...names])) as (XdsResource & {
      virtual_hosts?: { domains?: string[]; routes?: XdsRoute[] }[];
    })[];
    return configs.flatMap((config) =>
      (config.virtual_hosts ?? [])
        .filter((vh) => vh.domains?.includes(hostname) === true)
        .map((vh) => ({ routeConfig: config.name ?? '', routes: vh.routes ?? [] })),
    );
  });
}

/** An EDS cluster's endpoints, as far as the tests read them. */
interface LoadAssignment {
  cluster_name?: string;
  endpoints?: {
    lb_endpoints?: {
      endpoint?: { address?: { socket_address?: { address?: string; port_value?: number } } };
    }[];
  }[];
}

/**
 * The endpoints (`address:port`) Envoy Gateway gives an Envoy for the cluster `cluster`, read as
 * Envoy reads them: on one stream, every Cluster, then one EDS request naming every EDS cluster's
 * service name (Envoy Gateway's ADS-mode cache answers a named request only when it names all of
 * its snapshot's: see {@link xdsResources}). Empty when the cluster has none or is not an EDS one.
 *
 * @throws Error when a response does not arrive in time or the stream fails
 */
export async function clusterEndpoints(cluster: string): Promise<string[]> {
  return withAdsStream(async (ads) => {
    const clusters = (await ads.request(XDS_TYPE.cluster)) as (XdsResource & {
      type?: string;
      eds_cluster_config?: { service_name?: string };
    })[];
    const edsName = (c: (typeof clusters)[number]): string | undefined =>
      c.eds_cluster_config === undefined ? undefined : (c.eds_cluster_config.service_name ?? c.name);
    const names = [...new Set(clusters.map(edsName).filter((n): n is string => n !== undefined))];
    const wanted = clusters.find((c) => c.name === cluster);
    const wantedName = wanted === undefined ? undefined : edsName(wanted);
    if (wantedName === undefined || names.length === 0) return [];
    const assignments = (await ads.request(XDS_TYPE.endpoint, names)) as (XdsResource & LoadAssignment)[];
    return assignments
      .filter((a) => a.cluster_name === wantedName)
      .flatMap((a) => a.endpoints ?? [])
      .flatMap((e) => e.lb_endpoints ?? [])
      .map((e) => e.endpoint?.address?.socket_address)
      .map((a) => `${a?.address ?? ''}:${a?.port_value ?? ''}`);
  });
}
