import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  SEA_FUSE,
  checkPluginExecutable,
  machOSegments,
  peCertificateTableSize,
  readExecutableHeader,
  seaFuseFlipped,
  verifyAdHocSignature,
} from './executable.js';

/** An ELF header: 64-bit little-endian, e_machine `machine`. */
function elf(machine: number, size = 4096): Buffer {
  const b = Buffer.alloc(size);
  b.write('\x7fELF', 0, 'latin1');
  b[4] = 2;
  b[5] = 1;
  b.writeUInt16LE(machine, 18);
  return b;
}

/** A PE32+ image: MZ, e_lfanew 0x80, PE\0\0, Machine `machine`; certificate table of `certSize`. */
function pe(machine: number, certSize = 0, size = 4096): Buffer {
  const b = Buffer.alloc(size);
  b.write('MZ', 0, 'latin1');
  b.writeUInt32LE(0x80, 0x3c);
  b.write('PE\0\0', 0x80, 'latin1');
  b.writeUInt16LE(machine, 0x84);
  b.writeUInt16LE(0x20b, 0x80 + 24);
  b.writeUInt32LE(certSize, 0x80 + 24 + 112 + 4 * 8 + 4);
  return b;
}

const PAGE = 4096;

function flip(bytes: Buffer, at: number): void {
  bytes.writeUInt8(bytes.readUInt8(at) ^ 0xff, at);
}

/**
 * A Mach-O executable for `cputype` with a __TEXT and a NODE_SEA segment and `pages` pages of
 * content, then an ad-hoc code signature made here as codesign lays it out (SuperBlob with one
 * CodeDirectory, version 0x20400, SHA-256 page hashes of everything before the signature).
 */
function signedMachO(cputype: number, pages = 3, flags = 0x2): Buffer {
  const codeLimit = pages * PAGE;
  const body = Buffer.alloc(codeLimit);
  body.writeUInt32LE(0xfeedfacf, 0);
  body.writeUInt32LE(cputype, 4);
  body.writeUInt32LE(2, 12); // MH_EXECUTE
  body.writeUInt32LE(3, 16); // ncmds
  let at = 32;
  for (const name of ['__TEXT', 'NODE_SEA']) {
    body.writeUInt32LE(0x19, at); // LC_SEGMENT_64
    body.writeUInt32LE(72, at + 4);
    body.write(name, at + 8, 'latin1');
    at += 72;
  }
  const ident = Buffer.from('kubectl-portico\0');
  const hashOffset = 88 + ident.length;
  const cd = Buffer.alloc(hashOffset + pages * 32);
  cd.writeUInt32BE(0xfade0c02, 0);
  cd.writeUInt32BE(cd.length, 4);
  cd.writeUInt32BE(0x20400, 8);
  cd.writeUInt32BE(flags, 12);
  cd.writeUInt32BE(hashOffset, 16);
  cd.writeUInt32BE(88, 20);
  cd.writeUInt32BE(pages, 28);
  cd.writeUInt32BE(codeLimit, 32);
  cd[36] = 32;
  cd[37] = 2; // SHA-256
  cd[39] = 12; // 4096-byte pages
  ident.copy(cd, 88);
  body.writeUInt32LE(0x1d, at); // LC_CODE_SIGNATURE
  body.writeUInt32LE(16, at + 4);
  body.writeUInt32LE(codeLimit, at + 8);
  body.writeUInt32LE(20 + cd.length, at + 12);
  body.write(`${SEA_FUSE}:1`, 2 * PAGE, 'latin1');
  for (let i = 0; i < pages; i++) {
    createHash('sha256')
      .update(body.subarray(i * PAGE, (i + 1) * PAGE))
      .digest()
      .copy(cd, hashOffset + i * 32);
  }
  const superBlob = Buffer.alloc(20);
  superBlob.writeUInt32BE(0xfade0cc0, 0);
  superBlob.writeUInt32BE(20 + cd.length, 4);
  superBlob.writeUInt32BE(1, 8);
  superBlob.writeUInt32BE(0, 12); // CSSLOT_CODEDIRECTORY
  superBlob.writeUInt32BE(20, 16);
  return Buffer.concat([body, superBlob, cd]);
}

describe('readExecutableHeader', () => {
  it.each([
    [elf(0x3e), 'linux', 'amd64'],
    [elf(0xb7), 'linux', 'arm64'],
    [signedMachO(0x01000007), 'darwin', 'amd64'],
    [signedMachO(0x0100000c), 'darwin', 'arm64'],
    [pe(0x8664), 'windows', 'amd64'],
    [pe(0xaa64), 'windows', 'arm64'],
  ])('reads the OS and CPU of each format (%#)', (bytes, os, arch) => {
    expect(readExecutableHeader(bytes)).toMatchObject({ os, arch });
  });

  it('names a CPU the plugin is not built for, and refuses what is no 64-bit executable', () => {
    expect(readExecutableHeader(elf(0x28))).toEqual({
      os: 'linux',
      arch: undefined,
      detail: 'ELF e_machine 0x28',
    });
    const elf32 = elf(0x3e);
    elf32[4] = 1;
    expect(() => readExecutableHeader(elf32)).toThrow('not 64-bit little-endian');
    const pe32 = pe(0x14c);
    pe32.writeUInt16LE(0x10b, 0x80 + 24);
    expect(() => readExecutableHeader(pe32)).toThrow('not PE32+');
    const dylib = signedMachO(0x0100000c);
    dylib.writeUInt32LE(6, 12);
    expect(() => readExecutableHeader(dylib)).toThrow('not an executable (filetype 6)');
    expect(() => readExecutableHeader(Buffer.from('#!/bin/sh\n'))).toThrow(
      'not an ELF, Mach-O or PE executable',
    );
  });
});

describe('verifyAdHocSignature', () => {
  it('accepts an ad-hoc signature whose page hashes match, and names its identifier', () => {
    expect(verifyAdHocSignature(signedMachO(0x0100000c))).toEqual({
      identifier: 'kubectl-portico',
      pages: 3,
      pageSize: PAGE,
    });
    expect(machOSegments(signedMachO(0x0100000c))).toEqual(['__TEXT', 'NODE_SEA']);
  });

  it('names the page changed after signing', () => {
    const bytes = signedMachO(0x0100000c);
    flip(bytes, PAGE + 10);
    expect(() => verifyAdHocSignature(bytes)).toThrow('page 1 (bytes 4096-) does not match its hash');
  });

  it('refuses a signature that is not ad hoc, and a binary with none', () => {
    expect(() => verifyAdHocSignature(signedMachO(0x0100000c, 3, 0x10000))).toThrow(
      'not ad hoc (flags 0x10000)',
    );
    const unsigned = signedMachO(0x0100000c);
    unsigned.writeUInt32LE(2, 16); // ncmds: the LC_CODE_SIGNATURE no longer counted
    expect(() => verifyAdHocSignature(unsigned)).toThrow('no LC_CODE_SIGNATURE');
  });

  it('refuses a signature that leaves bytes before it unhashed', () => {
    const bytes = signedMachO(0x0100000c);
    const cd = PAGE * 3 + 20;
    bytes.writeUInt32BE(PAGE * 2, cd + 32); // codeLimit
    expect(() => verifyAdHocSignature(bytes)).toThrow(`covers ${PAGE * 2} bytes, not the ${PAGE * 3}`);
  });
});

describe('checkPluginExecutable', () => {
  const flipped = (b: Buffer): Buffer => {
    b.write(`${SEA_FUSE}:1`, 1024, 'latin1');
    return b;
  };

  it('passes an executable of the platform with the blob injected', () => {
    expect(() => {
      checkPluginExecutable(flipped(elf(0xb7)), { os: 'linux', arch: 'arm64' });
    }).not.toThrow();
    expect(() => {
      checkPluginExecutable(signedMachO(0x01000007), { os: 'darwin', arch: 'amd64' });
    }).not.toThrow();
    const exe = flipped(pe(0xaa64));
    Buffer.from('NODE_SEA_BLOB', 'utf16le').copy(exe, 2048);
    expect(() => {
      checkPluginExecutable(exe, { os: 'windows', arch: 'arm64' });
    }).not.toThrow();
  });

  it('names what is wrong: another platform, no blob, a broken or stale signature', () => {
    expect(() => {
      checkPluginExecutable(flipped(elf(0x3e)), { os: 'linux', arch: 'arm64' });
    }).toThrow('is linux-amd64 (ELF e_machine 0x3e), not linux-arm64');
    expect(() => {
      checkPluginExecutable(signedMachO(0x0100000c), { os: 'linux', arch: 'arm64' });
    }).toThrow('is darwin-arm64 (Mach-O cputype 0x100000c), not linux-arm64');
    expect(() => {
      checkPluginExecutable(elf(0x3e), { os: 'linux', arch: 'amd64' });
    }).toThrow('fuse is not flipped');
    const tampered = signedMachO(0x0100000c);
    flip(tampered, 100); // a load command's byte: signed, and not read by the header check
    expect(() => {
      checkPluginExecutable(tampered, { os: 'darwin', arch: 'arm64' });
    }).toThrow('page 0');
    const noResource = flipped(pe(0x8664));
    expect(() => {
      checkPluginExecutable(noResource, { os: 'windows', arch: 'amd64' });
    }).toThrow('NODE_SEA_BLOB');
    const stale = flipped(pe(0x8664, 9000));
    Buffer.from('NODE_SEA_BLOB', 'utf16le').copy(stale, 2048);
    expect(peCertificateTableSize(stale)).toBe(9000);
    expect(() => {
      checkPluginExecutable(stale, { os: 'windows', arch: 'amd64' });
    }).toThrow('Authenticode signature made before the injection');
  });

  it('reads the fuse only where it is flipped', () => {
    expect(seaFuseFlipped(Buffer.from(`${SEA_FUSE}:0`))).toBe(false);
    expect(seaFuseFlipped(Buffer.from(`x${SEA_FUSE}:1`))).toBe(true);
  });
});
