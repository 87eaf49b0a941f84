/**
 * Types for two of `dns-packet`'s exported codecs that @types/dns-packet leaves out: the domain-name
 * and TXT RDATA encoders (dns-packet 5.x, index.js `exports.name`, `exports.txt`).
 */
import 'dns-packet';

declare module 'dns-packet' {
  /** Encodes a domain name as uncompressed labels ending in the root label. */
  export const name: {
    encode(name: string, buf?: Buffer, offset?: number): Buffer;
  };
  /** Encodes TXT RDATA preceded by its 2-byte RDLENGTH: one character-string per element. */
  export const txt: {
    encode(data: ReadonlyArray<string | Buffer>, buf?: Buffer, offset?: number): Buffer;
  };
}
