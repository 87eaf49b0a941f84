/**
 * Sends TSIG-signed DNS UPDATE messages (RFC 2136, RFC 8945) to the authoritative server of the
 * platform's challenge zone over TCP (RFC 1035 §4.2.2: each message preceded by its 2-byte length),
 * and publishes or withdraws the TXT records of DNS-01 challenges (RFC 8555 §8.4).
 */
import { randomInt } from 'node:crypto';
import { Socket } from 'node:net';
import {
  readUpdateResponse,
  signMessage,
  updateMessage,
  type TsigKey,
  type TxtUpdate,
  type UpdateResponse,
} from './dynamic-update.js';

/**
 * How long the controller gives one update, connection included, in milliseconds: an update is one
 * TCP exchange with a server that writes its journal before it answers.
 */
export const DNS_UPDATE_TIMEOUT_MS = 10_000;

export interface DnsUpdateClientOptions {
  /** The authoritative server: host (name or address) and TCP port. */
  server: { host: string; port: number };
  /** The zone the records are in (the zone section, RFC 2136 §2.3), e.g. `acme-challenges.example.net`. */
  zone: string;
  key: TsigKey;
  /** How long one update may take, connection included, in milliseconds. */
  timeoutMs: number;
  /** Unix time in milliseconds; defaults to `Date.now`. */
  now?: () => number;
}

/**
 * The server refused or could not apply an update. `rcode` and `tsigError` are the server's own words
 * (RFC 2136 §2.2, RFC 8945 §5.3.2): REFUSED (the zone does not allow updates by this key), NOTAUTH (not
 * authoritative, or the key was refused), NOTZONE, BADKEY, BADSIG, BADTIME (clocks apart by more
 * than the fudge).
 */
export class DnsUpdateRefusedError extends Error {
  readonly rcode: string;
  readonly tsigError: string | undefined;
  constructor(zone: string, response: UpdateResponse) {
    const tsig =
      response.tsigError !== undefined && response.tsigError !== 'NOERROR'
        ? `, TSIG ${response.tsigError}`
        : '';
    super(`DNS UPDATE of zone ${zone} refused: ${response.rcode}${tsig}`);
    this.name = 'DnsUpdateRefusedError';
    this.rcode = response.rcode;
    this.tsigError = response.tsigError;
  }
}

/** The server answered NOERROR but without a signature that verifies with the key: not trusted. */
export class DnsUpdateUnverifiedError extends Error {
  constructor(zone: string) {
    super(
      `DNS UPDATE of zone ${zone}: the server's answer carries no TSIG signature that verifies with the key`,
    );
    this.name = 'DnsUpdateUnverifiedError';
  }
}

/** No answer in time, or the connection failed. */
export class DnsUpdateTransportError extends Error {
  constructor(server: string, cause: unknown) {
    super(`DNS UPDATE to ${server}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'DnsUpdateTransportError';
  }
}

/** Sends one framed message and resolves with the one framed answer. */
function exchange(
  server: { host: string; port: number },
  message: Buffer,
  timeoutMs: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let received = Buffer.alloc(0);
    const fail = (error: unknown): void => {
      socket.destroy();
      reject(new DnsUpdateTransportError(`${server.host}:${server.port}`, error));
    };
    socket.setTimeout(timeoutMs, () => {
      fail(new Error(`no answer within ${timeoutMs} ms`));
    });
    socket.once('error', fail);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 2) return;
      const length = received.readUInt16BE(0);
      if (received.length < 2 + length) return;
      socket.end();
      resolve(received.subarray(2, 2 + length));
    });
    socket.once('close', () => {
      if (received.length < 2 || received.length < 2 + received.readUInt16BE(0))
        fail(new Error('connection closed before a full answer'));
    });
    socket.connect(server.port, server.host, () => {
      const length = Buffer.alloc(2);
      length.writeUInt16BE(message.length);
      socket.write(Buffer.concat([length, message]));
    });
  });
}

export class DnsUpdateClient {
  readonly #options: DnsUpdateClientOptions;

  constructor(options: DnsUpdateClientOptions) {
    this.#options = options;
  }

  /**
   * Applies the changes in one UPDATE message, which the server applies all or none (RFC 2136 §3.4).
   *
   * @throws DnsUpdateRefusedError when the server answers other than NOERROR.
   * @throws DnsUpdateUnverifiedError when a NOERROR answer's signature does not verify.
   * @throws DnsUpdateTransportError on a connection failure or no answer within `timeoutMs`.
   */
  async apply(updates: readonly TxtUpdate[]): Promise<void> {
    const { server, zone, key, timeoutMs } = this.#options;
    const now = this.#options.now ?? Date.now;
    const request = signMessage(updateMessage(zone, updates, randomInt(0, 0x10000)), key, now() / 1000);
    const answer = await exchange(server, request.bytes, timeoutMs);
    if (answer.readUInt16BE(0) !== request.id) {
      throw new DnsUpdateTransportError(
        `${server.host}:${server.port}`,
        new Error('answer for another message ID'),
      );
    }
    const response = readUpdateResponse(answer, request, key, now() / 1000);
    if (response.rcode !== 'NOERROR') throw new DnsUpdateRefusedError(zone, response);
    if (!response.signatureVerified) throw new DnsUpdateUnverifiedError(zone);
  }

  /** Adds a TXT record (an existing identical one is left as is, RFC 2136 §3.4.2.2). */
  publishTxt(name: string, value: string, ttlSeconds: number): Promise<void> {
    return this.apply([{ operation: 'add', name, value, ttlSeconds }]);
  }

  /** Deletes one TXT record; deleting one that is not there succeeds (RFC 2136 §3.4.2.4). */
  withdrawTxt(name: string, value: string): Promise<void> {
    return this.apply([{ operation: 'delete', name, value }]);
  }
}
