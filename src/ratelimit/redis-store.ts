/**
 * The counters in Redis (ioredis): a single server, a Redis Cluster, or the primary Redis Sentinel
 * names, with TLS and ACL credentials (`redis-connection.ts`; the TLS files are read again every
 * `tlsFiles.refreshMs` and a change is used from the next connection on). One check is one EVALSHA of
 * the script in `script.ts` (ioredis `defineCommand` sends EVALSHA and falls back to EVAL once per
 * connection when Redis does not know the script yet).
 *
 * Auto-pipelining only under a backlog: while more than AUTO_PIPELINE_ABOVE_IN_FLIGHT checks wait for
 * Redis, ioredis gathers the commands of one event-loop turn into one write (fewer system calls: at
 * saturation ~10% more checks per second); below it each command is written as it is issued, as
 * envoyproxy/ratelimit does by default. Auto-pipelining costs garbage that lives long: a Pipeline
 * per turn (a copy of every command and script onto a new object, a promise, a Map/Set entry), and
 * those pipelines and their commands outlived V8's young-generation collections and were promoted
 * (bench:ratelimit at 3000 req/s: ~2.3 KB of each check, a quarter of all survivors), which
 * lengthened every scavenge. ioredis reads `options.enableAutoPipelining` on each command, so the
 * switch takes effect at once.
 *
 * Commands are never queued while Redis is unreachable (`enableOfflineQueue: false`) and time out
 * after `commandTimeoutMs`, so a check fails fast with StoreUnavailableError and the server answers by
 * its failure mode instead of piling up requests.
 *
 * A check answered by the failure mode is never charged later (docs/ratelimits.md, "Degraded mode
 * (Redis down)"; docs/adr/2026-11-25-ratelimit-script-deadline.md). A paused Redis (SIGSTOP,
 * `CLIENT PAUSE`, `DEBUG SLEEP`) keeps the connection: the command is already written, and Redis
 * runs it when it resumes, after the check timed out. So each script carries a deadline in Redis's
 * own clock (`redis-clock.ts`): the moment the command was sent plus `scriptBudgetMs` of the
 * timeout, translated by the measured offset of Redis's clock; Redis refuses to count past it. The
 * offset is measured with `TIME` on every node when the connection is ready, every
 * CLOCK_MEASURE_INTERVAL_MS, and at once when Redis says a check came too late; a check before the
 * first measurement waits for it.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { ConnectionOptions } from 'node:tls';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import type { CounterOutcome } from './decision.js';
import { StoreUnavailableError } from './errors.js';
import type { RedisCommand, RedisErrorKind } from './metrics.js';
import type { RedisCredentials } from './redis-credentials.js';
import {
  applyRedisCredentials,
  clusterNodeCredentials,
  redisClientOptions,
  redisConnectionErrorKind,
  tlsConnectionOptions,
  type RedisConnectionErrorKind,
  type RedisConnectionSettings,
  type RedisTlsFiles,
  type RedisTlsMaterial,
} from './redis-connection.js';
import { parseRedisTime, RedisClockOffset, scriptBudgetMs, type ClockSample } from './redis-clock.js';
import type { CounterKeys } from './redis-keys.js';
import type { BatchReply, PendingBatch } from './batched-counts.js';
import {
  ADD_BATCH_KEYS,
  ADD_BATCH_LUA,
  CHECK_AND_COUNT_KEYS,
  CHECK_AND_COUNT_LUA,
  parseBatchReply,
  parseScriptReply,
} from './script.js';

const COMMAND = 'porticoCheckAndCount';
const BATCH_COMMAND = 'porticoAddBatch';

/**
 * Checks waiting for Redis above which commands are auto-pipelined. At 3000 checks/s about one or
 * two wait at a time; closed-loop with 50 calls in flight, tens.
 */
export const AUTO_PIPELINE_ABOVE_IN_FLIGHT = 8;

/** How often the offset of Redis's clock is measured again (`TIME` on every node), ms. */
export const CLOCK_MEASURE_INTERVAL_MS = 10_000;

/** The arguments of one check, besides its keys. */
export interface CheckArgs {
  readonly hits: number;
  readonly minuteLimit: number;
  readonly dayLimit: number;
  /** Milliseconds. */
  readonly minuteTtlMs: number;
  /** Milliseconds. */
  readonly dayTtlMs: number;
  /** 0: the policy has no ban. */
  readonly banThreshold: number;
  /** Milliseconds. */
  readonly banDurationMs: number;
}

/** Where counters live. The gRPC service depends on this, not on Redis. */
export interface CounterStore {
  /** @throws StoreUnavailableError when Redis cannot answer */
  checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome>;
  /**
   * Which part of the store answers these keys, for the circuit breaker (`service.ts`): the same
   * string for keys one failure takes away together. One server: always ''. A Redis Cluster: the
   * primary that serves the keys' slot, so a primary that is down opens the breaker of its own keys
   * only and the others go on being counted in Redis.
   */
  shardOf?(keys: CounterKeys): string;
  /**
   * Adds hits already admitted (a batch of batched-counts.ts) to both windows; resolves to the
   * counts after it and the ban's time left. Never retried. Unset: the store cannot take batches,
   * and every check is exact.
   *
   * @throws StoreUnavailableError when Redis cannot answer (the batch may or may not be counted)
   */
  addBatch?(batch: PendingBatch): Promise<BatchReply>;
  /** True while connected. */
  readonly connected: boolean;
  close(): Promise<void>;
}

export interface RedisStoreOptions {
  /** One server, a cluster or Sentinel; TLS and credentials (redis-connection.ts). */
  readonly connection: RedisConnectionSettings;
  /** Milliseconds a command may take before it fails. */
  readonly commandTimeoutMs: number;
  /** Called on connection state changes, for logs and metrics. */
  readonly onStateChange?: (state: 'ready' | 'error', err?: Error) => void;
  /**
   * Called for each error on a connection (ioredis's `error` event: a refused password, a TLS
   * handshake that failed, no sentinel answering, a refused or reset connection), with its kind.
   */
  readonly onConnectionError?: (kind: RedisConnectionErrorKind, err: Error) => void;
  /** Local monotonic clock, ms; `performance.now()` when unset. */
  readonly monotonicNow?: () => number;
  /**
   * Called when each command to Redis has answered or failed, for metrics: `seconds` from sending it;
   * `error` unset when it succeeded.
   */
  readonly onCommand?: (command: RedisCommand, seconds: number, error?: RedisErrorKind) => void;
}

/**
 * The kind of an error ioredis gave for a command: `reply` for an error Redis answered (ReplyError),
 * `timeout` for `commandTimeout` ("Command timed out"), else `connection` (no connection and no
 * offline queue, or the connection closed while the command waited).
 */
export function redisErrorKind(err: unknown): RedisErrorKind {
  if (err instanceof Error && err.name === 'ReplyError') return 'reply';
  if (err instanceof Error && /timed out/i.test(err.message)) return 'timeout';
  return 'connection';
}

type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

function withScript(client: Redis | Cluster, name: string, numberOfKeys: number, lua: string): ScriptCommand {
  client.defineCommand(name, { numberOfKeys, lua });
  const command = (client as unknown as Record<string, ScriptCommand>)[name];
  if (command === undefined) throw new Error(`ioredis did not define ${name}`);
  return command.bind(client);
}

/** Reads the TLS files that are set. @throws the file system's error when one cannot be read */
function readTlsFilesSync(files: RedisTlsFiles): RedisTlsMaterial {
  return {
    ca: files.caFile === undefined ? undefined : readFileSync(files.caFile),
    cert: files.certFile === undefined ? undefined : readFileSync(files.certFile),
    key: files.keyFile === undefined ? undefined : readFileSync(files.keyFile),
  };
}

async function readTlsFiles(files: RedisTlsFiles): Promise<RedisTlsMaterial> {
  const read = (file: string | undefined): Promise<Buffer | undefined> =>
    file === undefined ? Promise.resolve(undefined) : readFile(file);
  const [ca, cert, key] = await Promise.all([read(files.caFile), read(files.certFile), read(files.keyFile)]);
  return { ca, cert, key };
}

function sameMaterial(a: RedisTlsMaterial, b: RedisTlsMaterial): boolean {
  const same = (x: Buffer | undefined, y: Buffer | undefined): boolean =>
    x === undefined ? y === undefined : y !== undefined && x.equals(y);
  return same(a.ca, b.ca) && same(a.cert, b.cert) && same(a.key, b.key);
}

/** A CounterStore on Redis. */
export class RedisCounterStore implements CounterStore {
  readonly #client: Redis | Cluster;
  readonly #check: ScriptCommand;
  readonly #addBatch: ScriptCommand;
  #connected = false;
  /** Checks sent to Redis and not answered yet. */
  #inFlight = 0;
  readonly #clock = new RedisClockOffset();
  readonly #now: () => number;
  readonly #budgetMs: number;
  readonly #commandTimeoutMs: number;
  readonly #onCommand: NonNullable<RedisStoreOptions['onCommand']>;
  /** The measurement in flight, if any (one at a time). */
  #measuring: Promise<void> | undefined;
  readonly #measureTimer: NodeJS.Timeout;
  /** The TLS options every connection is opened with (shared with ioredis); undefined: plaintext. */
  #tls: ConnectionOptions | undefined;
  #tlsMaterial: RedisTlsMaterial | undefined;
  #tlsTimer: NodeJS.Timeout | undefined;
  /** The credentials of the last `setCredentials`, for cluster nodes added later. */
  #credentials: RedisCredentials | undefined;

  constructor(options: RedisStoreOptions) {
    this.#now = options.monotonicNow ?? (() => performance.now());
    this.#commandTimeoutMs = options.commandTimeoutMs;
    this.#onCommand = options.onCommand ?? (() => undefined);
    this.#budgetMs = scriptBudgetMs(options.commandTimeoutMs);
    const { connection } = options;
    const usesTls =
      connection.tls || (connection.topology.kind === 'sentinel' && connection.topology.sentinelTls);
    if (usesTls) {
      this.#tlsMaterial = readTlsFilesSync(connection.tlsFiles);
      this.#tls = tlsConnectionOptions(this.#tlsMaterial, connection.tlsFiles.serverName);
    }
    const client = redisClientOptions(connection, this.#tls, {
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs,
      enableOfflineQueue: false,
      enableAutoPipelining: false,
    });
    this.#client =
      client.kind === 'cluster' ? new Cluster(client.seeds, client.options) : new Redis(client.options);
    this.#client.on('ready', () => {
      this.#connected = true;
      options.onStateChange?.('ready');
      void this.#loadScripts();
      void this.#measureClock();
    });
    // A lost connection shows as 'error' (refused, reset) or only as 'close' (the server closed it).
    const lost = (err?: Error): void => {
      if (this.#connected) options.onStateChange?.('error', err ?? new Error('connection closed'));
      this.#connected = false;
    };
    if (this.#client instanceof Cluster) {
      this.#client.on('+node', (node: Redis) => {
        if (this.#credentials !== undefined) clusterNodeCredentials(node, this.#credentials);
      });
    }
    this.#client.on('error', (err: Error) => {
      options.onConnectionError?.(redisConnectionErrorKind(err), err);
      lost(err);
    });
    this.#client.on('close', () => {
      lost();
    });
    this.#client.on('end', () => {
      lost();
    });
    this.#check = withScript(this.#client, COMMAND, CHECK_AND_COUNT_KEYS, CHECK_AND_COUNT_LUA);
    this.#addBatch = withScript(this.#client, BATCH_COMMAND, ADD_BATCH_KEYS, ADD_BATCH_LUA);
    this.#measureTimer = setInterval(() => void this.#measureClock(), CLOCK_MEASURE_INTERVAL_MS);
    this.#measureTimer.unref();
    if (this.#tls !== undefined) {
      const files = connection.tlsFiles;
      this.#tlsTimer = setInterval(() => void this.#reloadTls(files), files.refreshMs);
      this.#tlsTimer.unref();
    }
  }

  /**
   * Every later connection (a reconnect, a new cluster node, the primary after a failover, a
   * connection to a sentinel) authenticates with these credentials; undefined ones stay as they
   * are. Connections already open are kept (redis-credentials.ts).
   */
  setCredentials(credentials: RedisCredentials): void {
    this.#credentials = credentials;
    applyRedisCredentials(this.#client, credentials);
  }

  /**
   * Reads the TLS files again; when they changed, the next connection (a reconnect, a new cluster
   * node, the primary after a failover) uses them. The object ioredis holds is updated in place.
   * A file that cannot be read keeps the last good contents.
   */
  async #reloadTls(files: RedisTlsFiles): Promise<void> {
    const tls = this.#tls;
    if (tls === undefined) return;
    let material: RedisTlsMaterial;
    try {
      material = await readTlsFiles(files);
    } catch {
      return;
    }
    if (this.#tlsMaterial !== undefined && sameMaterial(material, this.#tlsMaterial)) return;
    this.#tlsMaterial = material;
    const next = tlsConnectionOptions(material, files.serverName);
    delete tls.ca;
    delete tls.cert;
    delete tls.key;
    Object.assign(tls, next);
  }

  /**
   * Loads both scripts on every node when the connection is ready (SCRIPT LOAD goes before any check
   * on that connection), so that a batch sent just before a check runs before it: ioredis answers a
   * NOSCRIPT by sending the script again (EVAL), which would put the first batch after the check.
   * Never throws (a node that did not load them gets them by that fallback).
   */
  async #loadScripts(): Promise<void> {
    await Promise.all(
      this.#nodes().map((node) =>
        Promise.all([node.script('LOAD', CHECK_AND_COUNT_LUA), node.script('LOAD', ADD_BATCH_LUA)]).catch(
          () => undefined,
        ),
      ),
    );
  }

  /** The nodes whose clocks matter: the server, or every master of a cluster. */
  #nodes(): Redis[] {
    return this.#client instanceof Cluster ? this.#client.nodes('master') : [this.#client];
  }

  /** One `TIME` round trip; undefined when the node did not answer in the command timeout. */
  async #sample(node: Redis): Promise<ClockSample | undefined> {
    const sentMs = this.#now();
    try {
      const reply = await node.time();
      const receivedMs = this.#now();
      this.#onCommand('time', (receivedMs - sentMs) / 1000);
      return { sentMs, receivedMs, redisMs: parseRedisTime(reply) };
    } catch (err: unknown) {
      this.#onCommand('time', (this.#now() - sentMs) / 1000, redisErrorKind(err));
      return undefined;
    }
  }

  /** Measures the offset of Redis's clock (never throws; one measurement at a time). */
  #measureClock(): Promise<void> {
    if (this.#measuring === undefined) {
      const measure = async (): Promise<void> => {
        const nodes = this.#nodes();
        if (nodes.length > 0) this.#clock.update(await Promise.all(nodes.map((n) => this.#sample(n))));
      };
      this.#measuring = measure().finally(() => {
        this.#measuring = undefined;
      });
    }
    return this.#measuring;
  }

  /** The deadline of a command sent now, Unix ms in Redis's clock; undefined before a measurement. */
  #deadlineNow(): number | undefined {
    return this.#clock.toRedisMs(this.#now() + this.#budgetMs);
  }

  /**
   * Measures Redis's clock, then gives the deadline of a command sent now.
   *
   * @throws StoreUnavailableError when `TIME` does not answer
   */
  async #firstDeadline(): Promise<number> {
    await this.#measureClock();
    const deadline = this.#deadlineNow();
    if (deadline === undefined) {
      throw new StoreUnavailableError(
        `Redis did not answer TIME within ${this.#commandTimeoutMs} ms; its clock must be known before ` +
          'a check is counted',
      );
    }
    return deadline;
  }

  shardOf(keys: CounterKeys): string {
    if (!(this.#client instanceof Cluster)) return '';
    const slot = calculateSlot(keys.minute);
    return this.#client.slots[slot]?.[0] ?? `slot ${slot}`;
  }

  get connected(): boolean {
    return this.#connected;
  }

  async checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
    // Awaits only before the first measurement of Redis's clock.
    const deadline = this.#deadlineNow() ?? (await this.#firstDeadline());
    this.#inFlight += 1;
    this.#client.options.enableAutoPipelining = this.#inFlight > AUTO_PIPELINE_ABOVE_IN_FLIGHT;
    let reply: unknown;
    const sentMs = this.#now();
    try {
      reply = await this.#check(
        keys.minute,
        keys.day,
        keys.ban,
        keys.rejected,
        args.hits,
        args.minuteLimit,
        args.dayLimit,
        args.minuteTtlMs,
        args.dayTtlMs,
        args.banThreshold,
        args.banDurationMs,
        deadline,
      );
    } catch (err: unknown) {
      this.#onCommand('check', (this.#now() - sentMs) / 1000, redisErrorKind(err));
      throw new StoreUnavailableError(err instanceof Error ? err.message : String(err), { cause: err });
    } finally {
      this.#inFlight -= 1;
    }
    const outcome = parseScriptReply(reply);
    const seconds = (this.#now() - sentMs) / 1000;
    if (outcome.kind === 'tooLate') {
      this.#onCommand('check', seconds, 'too_late');
      // Redis's clock runs ahead of the last measurement (a step), or the reply to TIME was slow.
      void this.#measureClock();
      throw new StoreUnavailableError(
        `Redis ran the check ${outcome.lateMs} ms after its deadline and did not count it`,
      );
    }
    this.#onCommand('check', seconds);
    return outcome;
  }

  async addBatch(batch: PendingBatch): Promise<BatchReply> {
    this.#inFlight += 1;
    this.#client.options.enableAutoPipelining = this.#inFlight > AUTO_PIPELINE_ABOVE_IN_FLIGHT;
    const sentMs = this.#now();
    let reply: unknown;
    try {
      reply = await this.#addBatch(
        batch.keys.minute,
        batch.keys.day,
        batch.keys.ban,
        batch.hits,
        batch.minuteTtlMs,
        batch.dayTtlMs,
      );
    } catch (err: unknown) {
      this.#onCommand('batch', (this.#now() - sentMs) / 1000, redisErrorKind(err));
      throw new StoreUnavailableError(err instanceof Error ? err.message : String(err), { cause: err });
    } finally {
      this.#inFlight -= 1;
    }
    this.#onCommand('batch', (this.#now() - sentMs) / 1000);
    return parseBatchReply(reply);
  }

  /** Closes the connection(s); pending commands fail. */
  async close(): Promise<void> {
    clearInterval(this.#measureTimer);
    clearInterval(this.#tlsTimer);
    // Closed on purpose: not a lost connection (no `onStateChange('error')`).
    this.#connected = false;
    try {
      await this.#client.quit();
    } catch {
      this.#client.disconnect();
    }
  }
}
