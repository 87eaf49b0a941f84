import { once } from 'node:events';
import { createSocket as createUdpSocket } from 'node:dgram';
import * as dnsPacket from 'dns-packet';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DnsResolver } from './resolver.js';

/**
 * A one-zone authoritative DNS server over UDP on 127.0.0.1: A queries for names in `addresses` get
 * that address with a TTL of 300 s; anything else gets NOERROR with no answer (NODATA). Counts the
 * questions it is asked.
 */
class TinyDnsServer {
  readonly addresses = new Map<string, string>();
  /** TXT records by name, each a list of character-strings. */
  readonly txt = new Map<string, string[][]>();
  /** MX records by name. */
  readonly mx = new Map<string, { preference: number; exchange: string }[]>();
  /** NS records by name. */
  readonly ns = new Map<string, string[]>();
  readonly asked: string[] = [];
  readonly #socket = createUdpSocket('udp4');

  async start(): Promise<string> {
    this.#socket.on('message', (message, peer) => {
      const query = dnsPacket.decode(message);
      const question = query.questions?.[0];
      if (question === undefined) return;
      this.asked.push(`${question.type} ${question.name}`);
      const address = question.type === 'A' ? this.addresses.get(question.name) : undefined;
      const txt = question.type === 'TXT' ? (this.txt.get(question.name) ?? []) : [];
      const mx = question.type === 'MX' ? (this.mx.get(question.name) ?? []) : [];
      const ns = question.type === 'NS' ? (this.ns.get(question.name) ?? []) : [];
      const response = dnsPacket.encode({
        type: 'response',
        id: query.id,
        flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED,
        questions: [question],
        answers: [
          ...(address === undefined
            ? []
            : [{ type: 'A' as const, name: question.name, ttl: 300, data: address }]),
          ...txt.map((strings) => ({ type: 'TXT' as const, name: question.name, ttl: 300, data: strings })),
          ...mx.map((data) => ({ type: 'MX' as const, name: question.name, ttl: 300, data })),
          ...ns.map((data) => ({ type: 'NS' as const, name: question.name, ttl: 300, data })),
        ],
      });
      this.#socket.send(response, peer.port, peer.address);
    });
    this.#socket.bind(0, '127.0.0.1');
    await once(this.#socket, 'listening');
    return `127.0.0.1:${this.#socket.address().port}`;
  }

  stop(): void {
    this.#socket.close();
  }
}

describe('DnsResolver against a DNS server over UDP', () => {
  let server: TinyDnsServer;
  let resolver: DnsResolver;

  beforeEach(async () => {
    server = new TinyDnsServer();
    resolver = new DnsResolver({ servers: [await server.start()], timeoutMs: 2_000, tries: 2 });
  });
  afterEach(() => {
    server.stop();
  });

  it('asks the server every time: an answer with a TTL of 300 s is not reused by the next check', async () => {
    server.addresses.set('shop.example', '192.0.2.10');
    expect((await resolver.lookupAddresses('shop.example')).a).toEqual({
      kind: 'records',
      values: ['192.0.2.10'],
    });
    server.addresses.set('shop.example', '192.0.2.20');
    expect((await resolver.lookupAddresses('shop.example')).a).toEqual({
      kind: 'records',
      values: ['192.0.2.20'],
    });
    expect(server.asked.filter((q) => q === 'A shop.example')).toHaveLength(2);
  });

  it('reads a TXT RRset, one value per record with its character-strings joined', async () => {
    server.txt.set('_portico-challenge.shop.example', [['portico-verification=', 'abc'], ['v=spf1 -all']]);
    expect(await resolver.lookupTxt('_portico-challenge.shop.example')).toEqual({
      kind: 'records',
      values: ['portico-verification=abc', 'v=spf1 -all'],
    });
    expect(await resolver.lookupTxt('_portico-challenge.other.example')).toEqual({ kind: 'nodata' });
  });

  it('reads MX, TXT and NS at a name without a CNAME only when asked to (a subdomain), as presentation values', async () => {
    server.mx.set('www.shop.example', [{ preference: 10, exchange: 'mail.shop.example' }]);
    server.txt.set('www.shop.example', [['v=spf1 -all']]);
    server.ns.set('www.shop.example', ['ns1.dns.example']);
    const plain = await resolver.lookupHostname('www.shop.example');
    expect(plain.others).toBeUndefined();
    expect(server.asked.some((q) => q.startsWith('MX '))).toBe(false);
    const full = await resolver.lookupHostname('www.shop.example', { otherRecords: true });
    expect(full.others).toEqual({
      mx: { kind: 'records', values: ['10 mail.shop.example'] },
      txt: { kind: 'records', values: ['v=spf1 -all'] },
      ns: { kind: 'records', values: ['ns1.dns.example'] },
    });
  });

  it('answers 50 lookups (150 queries) in flight at once on its one channel', async () => {
    for (let i = 0; i < 50; i += 1) server.addresses.set(`d${i}.shop.example`, `192.0.2.${i % 250}`);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => resolver.lookupHostname(`d${i}.shop.example`)),
    );
    answers.forEach((answer, i) => {
      expect(answer.a).toEqual({ kind: 'records', values: [`192.0.2.${i % 250}`] });
      expect(answer.cname).toEqual({ kind: 'nodata' });
    });
  });
});
