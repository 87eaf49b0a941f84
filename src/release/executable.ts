/**
 * Checks of the kubectl-portico executables a release builds (scripts/build-plugin-sea.ts): that each
 * is an executable of the platform it is named for, carries the single-executable blob, and, for
 * macOS, an ad-hoc code signature that matches its bytes. Pure: the file's bytes are a value.
 *
 * Formats read: ELF (the System V ABI's ELF header: e_ident, e_machine), Mach-O (Apple's
 * <mach-o/loader.h>: mach_header_64, load commands; <kern/cs_blobs.h>: the code signature
 * SuperBlob and CodeDirectory, big-endian), PE (Microsoft's PE Format: the MS-DOS stub's
 * e_lfanew, the COFF header's Machine, the optional header's magic).
 */
import { createHash } from 'node:crypto';
import type { PluginArch, PluginOs, PluginPlatform } from './artifacts.js';

/** ELF e_machine: EM_X86_64, EM_AARCH64. */
const ELF_MACHINE: Record<number, PluginArch> = { 0x3e: 'amd64', 0xb7: 'arm64' };
/** Mach-O cputype: CPU_TYPE_X86_64, CPU_TYPE_ARM64 (CPU_TYPE_* | CPU_ARCH_ABI64). */
const MACHO_CPU: Record<number, PluginArch> = { 0x01000007: 'amd64', 0x0100000c: 'arm64' };
/** PE COFF Machine: IMAGE_FILE_MACHINE_AMD64, IMAGE_FILE_MACHINE_ARM64. */
const PE_MACHINE: Record<number, PluginArch> = { 0x8664: 'amd64', 0xaa64: 'arm64' };

const MH_MAGIC_64 = 0xfeedfacf;
const MH_EXECUTE = 2;
const LC_SEGMENT_64 = 0x19;
const LC_CODE_SIGNATURE = 0x1d;
const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CSSLOT_CODEDIRECTORY = 0;
const CS_ADHOC = 0x2;
const CS_HASHTYPE_SHA256 = 2;

/**
 * The fuse Node.js flips to `:1` when a blob was injected (its single-executable-applications doc's
 * value, the same in Node.js 24 and 26).
 */
export const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** What an executable's header says it is. */
export interface ExecutableHeader {
  os: PluginOs;
  /** undefined for a CPU the plugin is not built for. */
  arch: PluginArch | undefined;
  /** e.g. `ELF e_machine 0xb7`, `Mach-O cputype 0x100000c`, `PE Machine 0xaa64`. */
  detail: string;
}

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}

/**
 * What `bytes` (at least the first 4 KiB of a file) is: a 64-bit little-endian ELF executable,
 * a 64-bit Mach-O executable or a PE32+ image. Pure.
 * @throws Error naming what was found when it is none of them.
 */
export function readExecutableHeader(bytes: Buffer): ExecutableHeader {
  if (bytes.length >= 20 && bytes.subarray(0, 4).toString('latin1') === '\x7fELF') {
    if (bytes[4] !== 2 || bytes[5] !== 1) {
      throw new Error(`an ELF that is not 64-bit little-endian (class ${bytes[4]}, data ${bytes[5]})`);
    }
    const machine = bytes.readUInt16LE(18);
    return { os: 'linux', arch: ELF_MACHINE[machine], detail: `ELF e_machine ${hex(machine)}` };
  }
  if (bytes.length >= 32 && bytes.readUInt32LE(0) === MH_MAGIC_64) {
    const cpu = bytes.readUInt32LE(4);
    const filetype = bytes.readUInt32LE(12);
    if (filetype !== MH_EXECUTE) throw new Error(`a Mach-O that is not an executable (filetype ${filetype})`);
    return { os: 'darwin', arch: MACHO_CPU[cpu], detail: `Mach-O cputype ${hex(cpu)}` };
  }
  if (bytes.length >= 64 && bytes.subarray(0, 2).toString('latin1') === 'MZ') {
    const pe = bytes.readUInt32LE(0x3c);
    if (pe + 26 > bytes.length || bytes.subarray(pe, pe + 4).toString('latin1') !== 'PE\0\0') {
      throw new Error('an MZ file without a PE header');
    }
    const machine = bytes.readUInt16LE(pe + 4);
    const magic = bytes.readUInt16LE(pe + 24);
    if (magic !== 0x20b)
      throw new Error(`a PE image that is not PE32+ (optional header magic ${hex(magic)})`);
    return { os: 'windows', arch: PE_MACHINE[machine], detail: `PE Machine ${hex(machine)}` };
  }
  throw new Error(`not an ELF, Mach-O or PE executable (starts ${bytes.subarray(0, 4).toString('hex')})`);
}

/**
 * The size of a PE32+ image's certificate table (the Authenticode signature: data directory 4 of
 * the optional header); 0 when unsigned. Pure.
 */
export function peCertificateTableSize(bytes: Buffer): number {
  const pe = bytes.readUInt32LE(0x3c);
  // Optional header at pe + 24; PE32+ data directories at its offset 112, 8 bytes each.
  return bytes.readUInt32LE(pe + 24 + 112 + 4 * 8 + 4);
}

/** Whether Node.js's single-executable fuse is flipped in `bytes` (a blob was injected). Pure. */
export function seaFuseFlipped(bytes: Buffer): boolean {
  return bytes.includes(`${SEA_FUSE}:1`, 0, 'latin1');
}

interface MachOLoad {
  segments: string[];
  signature: { dataoff: number; datasize: number } | undefined;
}

function machOLoadCommands(bytes: Buffer): MachOLoad {
  const ncmds = bytes.readUInt32LE(16);
  const segments: string[] = [];
  let signature: MachOLoad['signature'];
  let at = 32; // sizeof(mach_header_64)
  for (let i = 0; i < ncmds; i++) {
    const cmd = bytes.readUInt32LE(at);
    const cmdsize = bytes.readUInt32LE(at + 4);
    if (cmdsize < 8 || at + cmdsize > bytes.length) throw new Error(`Mach-O load command ${i} is cut short`);
    if (cmd === LC_SEGMENT_64) {
      segments.push(
        bytes
          .subarray(at + 8, at + 24)
          .toString('latin1')
          .replace(/\0+$/, ''),
      );
    } else if (cmd === LC_CODE_SIGNATURE) {
      signature = { dataoff: bytes.readUInt32LE(at + 8), datasize: bytes.readUInt32LE(at + 12) };
    }
    at += cmdsize;
  }
  return { segments, signature };
}

/** The Mach-O's segment names (`__TEXT`, `__LINKEDIT`, `NODE_SEA`, ...). Pure. */
export function machOSegments(bytes: Buffer): string[] {
  return machOLoadCommands(bytes).segments;
}

/** What verifyAdHocSignature found. */
export interface AdHocSignature {
  /** The CodeDirectory's identifier. */
  identifier: string;
  /** Pages hashed (SHA-256), each matching the file. */
  pages: number;
  pageSize: number;
}

/**
 * Verifies the Mach-O's embedded code signature as the macOS kernel does before running a page: an
 * ad-hoc (CS_ADHOC) CodeDirectory with SHA-256 page hashes that covers every byte before the
 * signature, and whose every page hash matches the file. Special slots (Info.plist, requirements,
 * entitlements) are not checked. Pure.
 * @throws Error naming the first thing that does not hold (no signature, not ad hoc, a page whose
 *   hash differs, ...).
 */
export function verifyAdHocSignature(bytes: Buffer): AdHocSignature {
  const { signature } = machOLoadCommands(bytes);
  if (signature === undefined) throw new Error('the Mach-O has no LC_CODE_SIGNATURE: it is not signed');
  const { dataoff, datasize } = signature;
  if (dataoff + datasize > bytes.length) throw new Error('the code signature lies past the end of the file');
  const blob = bytes.subarray(dataoff, dataoff + datasize);
  if (blob.readUInt32BE(0) !== CSMAGIC_EMBEDDED_SIGNATURE) {
    throw new Error(`the code signature is not an embedded SuperBlob (magic ${hex(blob.readUInt32BE(0))})`);
  }
  const count = blob.readUInt32BE(8);
  let cdOffset: number | undefined;
  for (let i = 0; i < count; i++) {
    if (blob.readUInt32BE(12 + i * 8) === CSSLOT_CODEDIRECTORY) cdOffset = blob.readUInt32BE(16 + i * 8);
  }
  if (cdOffset === undefined) throw new Error('the code signature has no CodeDirectory');
  const cd = blob.subarray(cdOffset);
  if (cd.readUInt32BE(0) !== CSMAGIC_CODEDIRECTORY)
    throw new Error('the CodeDirectory slot holds no CodeDirectory');
  const flags = cd.readUInt32BE(12);
  const hashOffset = cd.readUInt32BE(16);
  const identOffset = cd.readUInt32BE(20);
  const nCodeSlots = cd.readUInt32BE(28);
  const codeLimit = cd.readUInt32BE(32);
  const hashSize = cd.readUInt8(36);
  const hashType = cd.readUInt8(37);
  const pageSize = 2 ** cd.readUInt8(39);
  if ((flags & CS_ADHOC) === 0) throw new Error(`the CodeDirectory is not ad hoc (flags ${hex(flags)})`);
  if (hashType !== CS_HASHTYPE_SHA256 || hashSize !== 32) {
    throw new Error(`the CodeDirectory's hashes are not SHA-256 (type ${hashType}, size ${hashSize})`);
  }
  if (codeLimit !== dataoff) {
    throw new Error(`the CodeDirectory covers ${codeLimit} bytes, not the ${dataoff} before the signature`);
  }
  if (nCodeSlots !== Math.ceil(codeLimit / pageSize)) {
    throw new Error(
      `the CodeDirectory has ${nCodeSlots} page hashes for ${codeLimit} bytes of ${pageSize}-byte pages`,
    );
  }
  for (let i = 0; i < nCodeSlots; i++) {
    const page = bytes.subarray(i * pageSize, Math.min((i + 1) * pageSize, codeLimit));
    const want = cd.subarray(hashOffset + i * hashSize, hashOffset + (i + 1) * hashSize);
    if (!createHash('sha256').update(page).digest().equals(want)) {
      throw new Error(`page ${i} (bytes ${i * pageSize}-) does not match its hash in the CodeDirectory`);
    }
  }
  const identEnd = cd.indexOf(0, identOffset);
  return { identifier: cd.subarray(identOffset, identEnd).toString('utf8'), pages: nCodeSlots, pageSize };
}

/**
 * Checks a built kubectl-portico: the header is of `platform`, the single-executable fuse is
 * flipped, and the blob is where Node.js looks for it (Mach-O: the `NODE_SEA` segment; PE: the
 * `NODE_SEA_BLOB` resource, its name in UTF-16); a darwin one's ad-hoc signature matches its bytes;
 * a windows one carries no Authenticode signature (the original's would no longer match).
 * Pure.
 * @throws Error naming what does not hold.
 */
export function checkPluginExecutable(bytes: Buffer, platform: PluginPlatform): void {
  const header = readExecutableHeader(bytes);
  if (header.os !== platform.os || header.arch !== platform.arch) {
    throw new Error(
      `is ${header.os}-${header.arch ?? 'unknown'} (${header.detail}), not ${platform.os}-${platform.arch}`,
    );
  }
  if (!seaFuseFlipped(bytes)) throw new Error('has no single-executable blob (its fuse is not flipped)');
  if (platform.os === 'darwin') {
    if (!machOSegments(bytes).includes('NODE_SEA')) throw new Error('has no NODE_SEA segment');
    verifyAdHocSignature(bytes);
  }
  if (platform.os === 'windows') {
    if (!bytes.includes(Buffer.from('NODE_SEA_BLOB', 'utf16le')))
      throw new Error('has no NODE_SEA_BLOB resource');
    // A signature made before the injection no longer matches: unsigned is honest, broken is not.
    if (peCertificateTableSize(bytes) !== 0)
      throw new Error('carries an Authenticode signature made before the injection');
  }
}
