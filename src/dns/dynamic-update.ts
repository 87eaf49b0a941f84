/**
 * DNS UPDATE messages (RFC 2136) signed with TSIG (RFC 8945), for the TXT records of DNS-01
 * challenges in the platform's challenge zone. Pure: builds and reads bytes, no network (the
 * transport is `update-client.ts`).
 *
 * Names and TXT character-strings are encoded by `dns-packet`; it has no class NONE (254) and no TSIG
 * RDATA, so the update section's RR framing (RFC 1035 §4.1.3) and the TSIG record are written here.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as dnsPacket from 'dns-packet';

/** TSIG algorithms by their RFC 8945 §6 names (the names BIND's and Knot's configs use). */
export const TSIG_ALGORITHMS = [
  'hmac-sha256',
  'hmac-sha384',
  'hmac-sha512',
  'hmac-sha224',
  'hmac-sha1',
] as const;
export type TsigAlgorithm = (typeof TSIG_ALGORITHMS)[number];

/** A TSIG key as the authoritative server knows it. */
export interface TsigKey {
  /** The key's name, a domain name (e.g. `portico-challenge.`). */
  name: string;
  algorithm: TsigAlgorithm;
  /** The shared secret's bytes (configs hold it in base64). */
  secret: Buffer;
}

/** One change in the update section (RFC 2136 §2.5). */
export type TxtUpdate =
  /** §2.5.1 Add to an RRset. */
  | { operation: 'add'; name: string; value: string; ttlSeconds: number }
  /** §2.5.4 Delete one RR from an RRset (class NONE, TTL 0). */
  | { operation: 'delete'; name: string; value: string };

/** RFC 1035 §3.2.4 and RFC 2136 §1.3 classes. */
const CLASS_IN = 1;
const CLASS_NONE = 254;
const CLASS_ANY = 255;
const TYPE_TXT = 16;
const TYPE_SOA = 6;
const TYPE_TSIG = 250;
const OPCODE_UPDATE = 5;
const HEADER_BYTES = 12;

/** RFC 8945 §5.2.3: the fudge Portico sends, in seconds. */
export const TSIG_FUDGE_SECONDS = 300;

/** RFC 1035 §4.1.1, RFC 2136 §2.2 and RFC 8945 §3 RCODE names. */
const RCODE_NAMES: Readonly<Record<number, string>> = {
  0: 'NOERROR',
  1: 'FORMERR',
  2: 'SERVFAIL',
  3: 'NXDOMAIN',
  4: 'NOTIMP',
  5: 'REFUSED',
  6: 'YXDOMAIN',
  7: 'YXRRSET',
  8: 'NXRRSET',
  9: 'NOTAUTH',
  10: 'NOTZONE',
  16: 'BADSIG',
  17: 'BADKEY',
  18: 'BADTIME',
  22: 'BADTRUNC',
};

/** The name of an RCODE or TSIG error number, `RCODE<n>` for one without a name. */
export function rcodeName(code: number): string {
  return RCODE_NAMES[code] ?? `RCODE${code}`;
}

/** A domain name in canonical wire form (RFC 4034 §6.2: uncompressed, lowercase). */
function canonicalName(name: string): Buffer {
  return dnsPacket.name.encode(name.toLowerCase().replace(/\.$/, ''));
}

function u16(value: number): Buffer {
  const buf = Buffer.alloc(2);
  buf.writeUInt16BE(value);
  return buf;
}

function u32(value: number): Buffer {
  const buf = Buffer.alloc(4);
  buf.writeUInt32BE(value);
  return buf;
}

/** A 48-bit unsigned integer (TSIG's Time Signed, RFC 8945 §4.2). */
function u48(value: number): Buffer {
  const buf = Buffer.alloc(6);
  buf.writeUIntBE(value, 0, 6);
  return buf;
}

/** One resource record: owner, type, class, TTL, RDLENGTH, RDATA (RFC 1035 §4.1.3). */
function resourceRecord(name: string, type: number, klass: number, ttl: number, rdata: Buffer): Buffer {
  return Buffer.concat([canonicalName(name), u16(type), u16(klass), u32(ttl), u16(rdata.length), rdata]);
}

/**
 * The TXT RDATA of one value: the value split into character-strings of at most 255 bytes (RFC 1035
 * §3.3.14). An ACME DNS-01 value is 43 bytes (RFC 8555 §8.4), one string.
 */
function txtRdata(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const strings: Buffer[] = [];
  for (let offset = 0; offset < bytes.length || strings.length === 0; offset += 255) {
    strings.push(bytes.subarray(offset, offset + 255));
  }
  // dns-packet's TXT encoder writes RDLENGTH first; the RDATA is what follows it.
  return dnsPacket.txt.encode(strings).subarray(2);
}

/**
 * An unsigned UPDATE message for `zone`: the zone section names the zone's SOA (RFC 2136 §2.3), no
 * prerequisites, and one update RR per change.
 *
 * @param id the message ID (0–65535), echoed by the server.
 * @throws Error when a changed name is not inside `zone` (the server would answer NOTZONE).
 */
export function updateMessage(zone: string, updates: readonly TxtUpdate[], id: number): Buffer {
  const zoneName = zone.toLowerCase().replace(/\.$/, '');
  const records = updates.map((update) => {
    const owner = update.name.toLowerCase().replace(/\.$/, '');
    if (owner !== zoneName && !owner.endsWith(`.${zoneName}`)) {
      throw new Error(`DNS UPDATE: ${update.name} is not inside the zone ${zone}`);
    }
    return update.operation === 'add'
      ? resourceRecord(owner, TYPE_TXT, CLASS_IN, update.ttlSeconds, txtRdata(update.value))
      : resourceRecord(owner, TYPE_TXT, CLASS_NONE, 0, txtRdata(update.value));
  });
  const header = Buffer.concat([
    u16(id),
    u16(OPCODE_UPDATE << 11),
    u16(1), // ZOCOUNT
    u16(0), // PRCOUNT
    u16(records.length), // UPCOUNT
    u16(0), // ADCOUNT
  ]);
  const zoneSection = Buffer.concat([canonicalName(zoneName), u16(TYPE_SOA), u16(CLASS_IN)]);
  return Buffer.concat([header, zoneSection, ...records]);
}

/** The TSIG fields both the signature and the record carry (RFC 8945 §4.2). */
interface TsigFields {
  timeSigned: number;
  fudge: number;
  error: number;
  otherData: Buffer;
}

/** RFC 8945 §4.3.3: the TSIG variables that follow the message in the MAC's input. */
function tsigVariables(key: TsigKey, fields: TsigFields): Buffer {
  return Buffer.concat([
    canonicalName(key.name),
    u16(CLASS_ANY),
    u32(0),
    canonicalName(key.algorithm),
    u48(fields.timeSigned),
    u16(fields.fudge),
    u16(fields.error),
    u16(fields.otherData.length),
    fields.otherData,
  ]);
}

function hmac(key: TsigKey, ...parts: Buffer[]): Buffer {
  const mac = createHmac(key.algorithm.slice('hmac-'.length), key.secret);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** A signed request: the bytes to send and the MAC the response's signature covers. */
export interface SignedMessage {
  bytes: Buffer;
  /** The request's MAC (RFC 8945 §4.3.1: the response's MAC input starts with it). */
  mac: Buffer;
  id: number;
}

/**
 * Signs a message with TSIG (RFC 8945 §4.3.3): the MAC over the message and the TSIG variables, then
 * a TSIG RR appended to the additional section (ARCOUNT + 1).
 *
 * @param message an unsigned message whose additional section is empty or complete.
 * @param nowSeconds Unix time in seconds, the Time Signed.
 */
export function signMessage(message: Buffer, key: TsigKey, nowSeconds: number): SignedMessage {
  const fields: TsigFields = {
    timeSigned: Math.floor(nowSeconds),
    fudge: TSIG_FUDGE_SECONDS,
    error: 0,
    otherData: Buffer.alloc(0),
  };
  const mac = hmac(key, message, tsigVariables(key, fields));
  const id = message.readUInt16BE(0);
  const rdata = Buffer.concat([
    canonicalName(key.algorithm),
    u48(fields.timeSigned),
    u16(fields.fudge),
    u16(mac.length),
    mac,
    u16(id), // Original ID
    u16(fields.error),
    u16(0), // Other Len
  ]);
  const bytes = Buffer.concat([message, resourceRecord(key.name, TYPE_TSIG, CLASS_ANY, 0, rdata)]);
  bytes.writeUInt16BE(message.readUInt16BE(10) + 1, 10);
  return { bytes, mac, id };
}

/** What the server answered to an UPDATE. */
export interface UpdateResponse {
  /** RCODE name: NOERROR, REFUSED, NOTAUTH, NOTZONE, ... (RFC 2136 §2.2). */
  rcode: string;
  /** The TSIG record's error field when the response carries one: BADSIG, BADKEY, BADTIME, or NOERROR. */
  tsigError?: string;
  /**
   * Whether the response's TSIG MAC verified against the request's key. Servers answer BADKEY and
   * BADSIG unsigned (RFC 8945 §5.3.2), so an unsigned error response is expected; an unsigned or
   * unverified NOERROR is not to be trusted.
   */
  signatureVerified: boolean;
}

/** Reads the owner name's end: skips labels and stops after a terminal zero or a pointer. */
function skipName(buf: Buffer, offset: number): number {
  let at = offset;
  for (;;) {
    const length = buf.readUInt8(at);
    if (length === 0) return at + 1;
    if ((length & 0xc0) === 0xc0) return at + 2;
    at += 1 + length;
  }
}

/** Skips one question (name, type, class). */
function skipQuestion(buf: Buffer, offset: number): number {
  return skipName(buf, offset) + 4;
}

/** Skips one RR, returning its type and where it ends. */
function skipRecord(buf: Buffer, offset: number): { type: number; rdataStart: number; end: number } {
  const afterName = skipName(buf, offset);
  const type = buf.readUInt16BE(afterName);
  const rdlength = buf.readUInt16BE(afterName + 8);
  return { type, rdataStart: afterName + 10, end: afterName + 10 + rdlength };
}

/**
 * Reads a response to a signed request: its RCODE, the TSIG error and whether its MAC verifies
 * (RFC 8945 §5.3: MAC over the request's MAC, the response without its TSIG RR and with its original ID,
 * and the TSIG variables).
 *
 * @param nowSeconds Unix time in seconds; a signature outside Time Signed ± fudge is not verified.
 * @throws Error when the bytes are not a DNS message (truncated or malformed).
 */
export function readUpdateResponse(
  response: Buffer,
  request: SignedMessage,
  key: TsigKey,
  nowSeconds: number,
): UpdateResponse {
  if (response.length < HEADER_BYTES)
    throw new Error(`DNS UPDATE: a response of ${response.length} bytes is not a DNS message`);
  const rcode = rcodeName(response.readUInt16BE(2) & 0x0f);
  const counts = [4, 6, 8, 10].map((at) => response.readUInt16BE(at));
  const [questions, answers, authorities, additionals] = counts as [number, number, number, number];
  let offset = HEADER_BYTES;
  for (let i = 0; i < questions; i++) offset = skipQuestion(response, offset);
  for (let i = 0; i < answers + authorities + additionals - 1; i++) offset = skipRecord(response, offset).end;
  if (additionals === 0) return { rcode, signatureVerified: false };
  const tsigStart = offset;
  const last = skipRecord(response, tsigStart);
  if (last.type !== TYPE_TSIG) return { rcode, signatureVerified: false };
  let at = skipName(response, last.rdataStart);
  const timeSigned = response.readUIntBE(at, 6);
  const fudge = response.readUInt16BE(at + 6);
  const macSize = response.readUInt16BE(at + 8);
  const mac = response.subarray(at + 10, at + 10 + macSize);
  at += 10 + macSize;
  const originalId = response.readUInt16BE(at);
  const error = response.readUInt16BE(at + 2);
  const otherLength = response.readUInt16BE(at + 4);
  const otherData = response.subarray(at + 6, at + 6 + otherLength);
  const tsigError = rcodeName(error);
  if (macSize === 0) return { rcode, tsigError, signatureVerified: false };

  const unsigned = Buffer.from(response.subarray(0, tsigStart));
  unsigned.writeUInt16BE(originalId, 0);
  unsigned.writeUInt16BE(additionals - 1, 10);
  const expected = hmac(
    key,
    u16(request.mac.length),
    request.mac,
    unsigned,
    tsigVariables(key, { timeSigned, fudge, error, otherData }),
  );
  const inTime = Math.abs(nowSeconds - timeSigned) <= fudge;
  const signatureVerified = inTime && expected.length === mac.length && timingSafeEqual(expected, mac);
  return { rcode, tsigError, signatureVerified };
}
