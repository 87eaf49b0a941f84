/**
 * The counters in Redis (ioredis), a single server or a Redis Cluster. One check is one EVALSHA of
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
 */
import { Cluster, Redis } from 'ioredis';
import type { CounterOutcome } from './decision.js';
import { StoreUnavailableError } from './errors.js';
import type { CounterKeys } from './redis-keys.js';
import { CHECK_AND_COUNT_KEYS, CHECK_AND_COUNT_LUA, parseScriptReply } from './script.js';

const COMMAND = 'porticoCheckAndCount';

/**
 * Checks waiting for Redis above which commands are auto-pipelined. At 3000 checks/s about one or
 * two wait at a time; closed-loop with 50 calls in flight, tens.
 */
export const AUTO_PIPELINE_ABOVE_IN_FLIGHT = 8;

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
  /** True while connected. */
  readonly connected: boolean;
  close(): Promise<void>;
}

export interface RedisStoreOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://...`; a seed node for a cluster. */
  readonly url: string;
  readonly cluster: boolean;
  /** Milliseconds a command may take before it fails. */
  readonly commandTimeoutMs: number;
  /** Called on connection state changes, for logs and metrics. */
  readonly onStateChange?: (state: 'ready' | 'error', err?: Error) => void;
}

type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

function withScript(client: Redis | Cluster): ScriptCommand {
  client.defineCommand(COMMAND, { numberOfKeys: CHECK_AND_COUNT_KEYS, lua: CHECK_AND_COUNT_LUA });
  const command = (client as unknown as Record<string, ScriptCommand>)[COMMAND];
  if (command === undefined) throw new Error(`ioredis did not define ${COMMAND}`);
  return command.bind(client);
}

interface SeedOptions {
  username?: string;
  password?: string;
  tls?: Record<string, never>;
}

function clusterSeed(url: string): { host: string; port: number; options: SeedOptions } {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: u.port === '' ? 6379 : Number(u.port),
    options: {
      ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
      ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
      ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
    },
  };
}

/** A CounterStore on Redis. */
export class RedisCounterStore implements CounterStore {
  readonly #client: Redis | Cluster;
  readonly #check: ScriptCommand;
  #connected = false;
  /** Checks sent to Redis and not answered yet. */
  #inFlight = 0;

  constructor(options: RedisStoreOptions) {
    const perConnection = { maxRetriesPerRequest: 0, commandTimeout: options.commandTimeoutMs };
    const common = { ...perConnection, enableOfflineQueue: false, enableAutoPipelining: false };
    if (options.cluster) {
      const seed = clusterSeed(options.url);
      this.#client = new Cluster([{ host: seed.host, port: seed.port }], {
        enableOfflineQueue: false,
        enableAutoPipelining: false,
        redisOptions: { ...seed.options, ...perConnection },
      });
    } else {
      this.#client = new Redis(options.url, common);
    }
    this.#client.on('ready', () => {
      this.#connected = true;
      options.onStateChange?.('ready');
    });
    // A lost connection shows as 'error' (refused, reset) or only as 'close' (the server closed it).
    const lost = (err?: Error): void => {
      if (this.#connected) options.onStateChange?.('error', err ?? new Error('connection closed'));
      this.#connected = false;
    };
    this.#client.on('error', lost);
    this.#client.on('close', () => {
      lost();
    });
    this.#client.on('end', () => {
      lost();
    });
    this.#check = withScript(this.#client);
  }

  get connected(): boolean {
    return this.#connected;
  }

  async checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
    this.#inFlight += 1;
    this.#client.options.enableAutoPipelining = this.#inFlight > AUTO_PIPELINE_ABOVE_IN_FLIGHT;
    let reply: unknown;
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
      );
    } catch (err: unknown) {
      throw new StoreUnavailableError(err instanceof Error ? err.message : String(err), { cause: err });
    } finally {
      this.#inFlight -= 1;
    }
    return parseScriptReply(reply);
  }

  /** Closes the connection(s); pending commands fail. */
  async close(): Promise<void> {
    try {
      await this.#client.quit();
    } catch {
      this.#client.disconnect();
    }
  }
}
