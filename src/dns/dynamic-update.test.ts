import { createHmac } from 'node:crypto';
import * as dnsPacket from 'dns-packet';
import { describe, expect, it } from 'vitest';
import { rcodeName, readUpdateResponse, signMessage, updateMessage, type TsigKey } from './dynamic-update.js';

const key: TsigKey = { name: 'portico-challenge.', algorithm: 'hmac-sha256', secret: Buffer.alloc(32, 7) };
const ZONE = 'acme-challenges.example.net';
const NOW = 1_800_000_000;

/** Encodes a name as uncompressed labels (test-side, independent of the module's encoder). */
function wireName(name: string): Buffer {
  const labels = name.replace(/\.$/, '').split('.').filter(Boolean);
  return Buffer.concat([
    ...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l.toLowerCase())])),
    Buffer.from([0]),
  ]);
}

function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v);
  return b;
}

/**
 * A server's signed answer to `request` with `rcode`, signed as RFC 8945 §4.3.1 says (the request's
 * MAC first), written here from the RFC rather than with the module's own signer.
 */
function signedAnswer(
  request: { bytes: Buffer; mac: Buffer; id: number },
  rcode: number,
  signer: TsigKey,
  timeSigned: number,
): Buffer {
  // The answer echoes the header with QR set and the zone section (RFC 2136 §3.8), no other sections.
  const zoneSectionEnd = 12 + wireName(ZONE).length + 4;
  const header = Buffer.from(request.bytes.subarray(0, 12));
  header.writeUInt16BE(0x8000 | (5 << 11) | rcode, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(0, 6);
  header.writeUInt16BE(0, 8);
  header.writeUInt16BE(0, 10);
  const unsigned = Buffer.concat([header, request.bytes.subarray(12, zoneSectionEnd)]);
  const time = Buffer.alloc(6);
  time.writeUIntBE(timeSigned, 0, 6);
  const variables = Buffer.concat([
    wireName(signer.name),
    u16(255),
    Buffer.alloc(4),
    wireName(signer.algorithm),
    time,
    u16(300),
    u16(0),
    u16(0),
  ]);
  const mac = createHmac('sha256', signer.secret)
    .update(Buffer.concat([u16(request.mac.length), request.mac, unsigned, variables]))
    .digest();
  const rdata = Buffer.concat([
    wireName(signer.algorithm),
    time,
    u16(300),
    u16(mac.length),
    mac,
    u16(request.id),
    u16(0),
    u16(0),
  ]);
  const tsig = Buffer.concat([
    wireName(signer.name),
    u16(250),
    u16(255),
    Buffer.alloc(4),
    u16(rdata.length),
    rdata,
  ]);
  const signed = Buffer.concat([unsigned, tsig]);
  signed.writeUInt16BE(1, 10);
  return signed;
}

describe('updateMessage (RFC 2136)', () => {
  it('has opcode UPDATE, the zone SOA in the zone section, and one RR per change', () => {
    const message = updateMessage(
      `${ZONE}.`,
      [
        { operation: 'add', name: `abc.${ZONE}`, value: 'token-1', ttlSeconds: 60 },
        { operation: 'delete', name: `ABC.${ZONE}.`, value: 'token-0' },
      ],
      0x1234,
    );
    const decoded = dnsPacket.decode(message);
    expect(decoded.id).toBe(0x1234);
    expect((message.readUInt16BE(2) >> 11) & 0xf).toBe(5); // OPCODE UPDATE
    expect(decoded.questions).toEqual([{ name: ZONE, type: 'SOA', class: 'IN' }]);
    expect(decoded.answers).toEqual([]);
    const [add, del] = decoded.authorities as Array<{
      name: string;
      type: string;
      class: string;
      ttl: number;
      data: Buffer[];
    }>;
    expect(add).toMatchObject({ name: `abc.${ZONE}`, type: 'TXT', class: 'IN', ttl: 60 });
    expect(add?.data.map(String)).toEqual(['token-1']);
    // RFC 2136 §2.5.4: class NONE, TTL 0, the RDATA of the one RR to delete.
    expect(del).toMatchObject({ name: `abc.${ZONE}`, type: 'TXT', class: 'UNKNOWN_254', ttl: 0 });
    expect(del?.data.map(String)).toEqual(['token-0']);
  });

  it('splits a value longer than 255 bytes into character-strings', () => {
    const value = 'v'.repeat(300);
    const decoded = dnsPacket.decode(
      updateMessage(ZONE, [{ operation: 'add', name: ZONE, value, ttlSeconds: 1 }], 1),
    );
    const [add] = decoded.authorities as Array<{ data: Buffer[] }>;
    expect(add?.data.map((b) => b.length)).toEqual([255, 45]);
  });

  it('refuses a name outside the zone, including a sibling that only ends with its text', () => {
    expect(() =>
      updateMessage(ZONE, [{ operation: 'add', name: 'x.example.com', value: 'v', ttlSeconds: 1 }], 1),
    ).toThrow('DNS UPDATE: x.example.com is not inside the zone acme-challenges.example.net');
    expect(() =>
      updateMessage(ZONE, [{ operation: 'add', name: `evil-${ZONE}`, value: 'v', ttlSeconds: 1 }], 1),
    ).toThrow(/not inside/);
  });
});

describe('signMessage and readUpdateResponse (RFC 8945)', () => {
  const request = signMessage(
    updateMessage(ZONE, [{ operation: 'add', name: `a.${ZONE}`, value: 'v', ttlSeconds: 60 }], 42),
    key,
    NOW,
  );

  it('appends one TSIG RR (class ANY, TTL 0) and counts it in ARCOUNT', () => {
    const decoded = dnsPacket.decode(request.bytes);
    expect(decoded.additionals).toHaveLength(1);
    expect(decoded.additionals?.[0]).toMatchObject({
      name: 'portico-challenge',
      type: 'TSIG',
      class: 'ANY',
      ttl: 0,
    });
    expect(request.mac).toHaveLength(32);
  });

  it('the MAC covers the message and the TSIG variables as RFC 8945 §4.3.3 lists them', () => {
    const unsigned = updateMessage(
      ZONE,
      [{ operation: 'add', name: `a.${ZONE}`, value: 'v', ttlSeconds: 60 }],
      42,
    );
    const time = Buffer.alloc(6);
    time.writeUIntBE(NOW, 0, 6);
    const variables = Buffer.concat([
      wireName(key.name),
      u16(255),
      Buffer.alloc(4),
      wireName('hmac-sha256'),
      time,
      u16(300),
      u16(0),
      u16(0),
    ]);
    const expected = createHmac('sha256', key.secret)
      .update(Buffer.concat([unsigned, variables]))
      .digest();
    expect(request.mac.equals(expected)).toBe(true);
  });

  it('verifies an answer signed with the key over the request MAC', () => {
    const answer = signedAnswer(request, 0, key, NOW + 1);
    expect(readUpdateResponse(answer, request, key, NOW + 2)).toEqual({
      rcode: 'NOERROR',
      tsigError: 'NOERROR',
      signatureVerified: true,
    });
  });

  it('does not verify an answer signed with another secret, changed on the way, or outside the fudge', () => {
    const other = signedAnswer(request, 0, { ...key, secret: Buffer.alloc(32, 9) }, NOW);
    expect(readUpdateResponse(other, request, key, NOW).signatureVerified).toBe(false);

    const tampered = signedAnswer(request, 0, key, NOW);
    tampered.writeUInt16BE(tampered.readUInt16BE(2) | 5, 2); // RCODE turned into REFUSED after signing
    expect(readUpdateResponse(tampered, request, key, NOW)).toMatchObject({
      rcode: 'REFUSED',
      signatureVerified: false,
    });

    const stale = signedAnswer(request, 0, key, NOW);
    expect(readUpdateResponse(stale, request, key, NOW + 301).signatureVerified).toBe(false);
    expect(readUpdateResponse(stale, request, key, NOW + 300).signatureVerified).toBe(true);
  });

  it('reads an unsigned answer (how servers send BADKEY) as not verified', () => {
    const answer = Buffer.from(request.bytes.subarray(0, 12));
    answer.writeUInt16BE(0x8000 | (5 << 11) | 9, 2);
    answer.writeUInt16BE(0, 4);
    answer.writeUInt16BE(0, 10);
    expect(readUpdateResponse(answer, request, key, NOW)).toEqual({
      rcode: 'NOTAUTH',
      signatureVerified: false,
    });
  });

  it('refuses bytes too short to be a message', () => {
    expect(() => readUpdateResponse(Buffer.alloc(5), request, key, NOW)).toThrow(
      'DNS UPDATE: a response of 5 bytes is not a DNS message',
    );
  });
});

describe('rcodeName', () => {
  it('names the RCODEs and TSIG errors of RFC 2136 and RFC 8945', () => {
    expect([0, 5, 9, 10, 16, 17, 18].map(rcodeName)).toEqual([
      'NOERROR',
      'REFUSED',
      'NOTAUTH',
      'NOTZONE',
      'BADSIG',
      'BADKEY',
      'BADTIME',
    ]);
    expect(rcodeName(23)).toBe('RCODE23');
  });
});
