import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CredentialFileError,
  CredentialFileWatcher,
  changedCredentials,
  credentialFromText,
  readCredentialFiles,
  readCredentialFilesSync,
  type RedisCredentialName,
  type RedisCredentials,
} from './redis-credentials.js';

const watchers: CredentialFileWatcher[] = [];
afterEach(() => {
  for (const w of watchers.splice(0)) w.close();
});

/**
 * A directory laid out as the kubelet mounts a Secret: `password -> ..data/password`, `..data` a
 * symlink to a timestamped directory; `update` writes a new one and swaps `..data` by rename.
 */
function secretVolume(contents: Record<string, string>): {
  dir: string;
  update(c: Record<string, string>): void;
} {
  const dir = mkdtempSync(path.join(tmpdir(), 'portico-secret-'));
  let n = 0;
  const write = (c: Record<string, string>): void => {
    n += 1;
    const ts = `..2026_11_28_${n}`;
    mkdirSync(path.join(dir, ts));
    for (const [k, v] of Object.entries(c)) writeFileSync(path.join(dir, ts, k), v);
    symlinkSync(ts, path.join(dir, '..data_tmp'));
    renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  };
  write(contents);
  for (const k of Object.keys(contents)) symlinkSync(path.join('..data', k), path.join(dir, k));
  return { dir, update: write };
}

function waitUntil(what: string, ok: () => boolean, ms = 3_000): Promise<void> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const tick = (): void => {
      if (ok()) resolve();
      else if (Date.now() - start > ms) reject(new Error(`timed out waiting for ${what}`));
      else setTimeout(tick, 10);
    };
    tick();
  });
}

describe('credentialFromText', () => {
  it('drops one trailing line break only', () => {
    expect(credentialFromText('s3cret\n')).toBe('s3cret');
    expect(credentialFromText('s3cret\r\n')).toBe('s3cret');
    expect(credentialFromText('s3cret')).toBe('s3cret');
    expect(credentialFromText(' s3 cret \n\n')).toBe(' s3 cret \n');
  });

  it('refuses an empty file', () => {
    expect(() => credentialFromText('')).toThrow(/empty/);
    expect(() => credentialFromText('\n')).toThrow(/empty/);
  });
});

describe('reading the credential files', () => {
  it('reads the files that are set, and names the credential of one that cannot be read', async () => {
    const { dir } = secretVolume({ username: 'portico\n', password: 'A' });
    const files = {
      usernameFile: path.join(dir, 'username'),
      passwordFile: path.join(dir, 'password'),
      sentinelPasswordFile: undefined,
    };
    const want: RedisCredentials = { username: 'portico', password: 'A', sentinelPassword: undefined };
    expect(readCredentialFilesSync(files)).toEqual(want);
    expect(await readCredentialFiles(files)).toEqual(want);
    const missing = { ...files, sentinelPasswordFile: path.join(dir, 'sentinel-password') };
    const err = await readCredentialFiles(missing).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CredentialFileError);
    expect(err).toMatchObject({ credential: 'sentinelPassword', file: missing.sentinelPasswordFile });
    expect((err as Error).message).toMatch(/ENOENT/);
    expect(() => readCredentialFilesSync(missing)).toThrow(CredentialFileError);
  });

  it('names the credentials whose values changed', () => {
    const a: RedisCredentials = { username: 'u', password: 'A', sentinelPassword: 'S' };
    expect(changedCredentials(a, { ...a, password: 'B' })).toEqual(['password']);
    expect(changedCredentials(a, a)).toEqual([]);
  });
});

describe('CredentialFileWatcher', () => {
  it("sees the kubelet's swap of ..data in a Secret volume and reports only changed contents", async () => {
    const volume = secretVolume({ password: 'A', 'sentinel-password': 'S' });
    const files = {
      usernameFile: undefined,
      passwordFile: path.join(volume.dir, 'password'),
      sentinelPasswordFile: path.join(volume.dir, 'sentinel-password'),
    };
    const changes: { credentials: RedisCredentials; changed: readonly RedisCredentialName[] }[] = [];
    const w = new CredentialFileWatcher({
      files,
      initial: readCredentialFilesSync(files),
      onChange: (credentials, changed) => changes.push({ credentials, changed }),
      onError: (err) => {
        throw err;
      },
      pollMs: 60_000,
      debounceMs: 20,
    });
    watchers.push(w);
    volume.update({ password: 'B', 'sentinel-password': 'S' });
    await waitUntil('the change', () => changes.length === 1);
    expect(changes[0]).toEqual({
      credentials: { username: undefined, password: 'B', sentinelPassword: 'S' },
      changed: ['password'],
    });
    expect(w.current.password).toBe('B');
    // The same contents written again: no change reported.
    volume.update({ password: 'B', 'sentinel-password': 'S' });
    await new Promise((r) => setTimeout(r, 200));
    await w.check();
    expect(changes).toHaveLength(1);
  });

  it('keeps the previous credentials when a file cannot be read, reports the error once, and recovers', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'portico-cred-'));
    const file = path.join(dir, 'password');
    writeFileSync(file, 'A');
    const changes: RedisCredentials[] = [];
    const errors: CredentialFileError[] = [];
    const w = new CredentialFileWatcher({
      files: { usernameFile: undefined, passwordFile: file, sentinelPasswordFile: undefined },
      initial: { username: undefined, password: 'A', sentinelPassword: undefined },
      onChange: (c) => changes.push(c),
      onError: (e) => errors.push(e),
      pollMs: 60_000,
      debounceMs: 10,
    });
    watchers.push(w);
    rmSync(file);
    await w.check();
    await w.check();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ credential: 'password', file });
    expect(w.current.password).toBe('A');
    writeFileSync(file, '');
    await w.check();
    expect(errors).toHaveLength(2);
    expect(errors[1]?.reason).toMatch(/empty/);
    expect(changes).toEqual([]);
    writeFileSync(file, 'B\n');
    await waitUntil('the change', () => changes.length === 1);
    expect(changes[0]?.password).toBe('B');
  });

  it('reads the files on its poll when the file system gives no event', async () => {
    // Events are debounced past the test's end: only the poll can see the change.
    const dir = mkdtempSync(path.join(tmpdir(), 'portico-cred-poll-'));
    const file = path.join(dir, 'password');
    writeFileSync(file, 'A');
    const changes: RedisCredentials[] = [];
    const w = new CredentialFileWatcher({
      files: { usernameFile: undefined, passwordFile: file, sentinelPasswordFile: undefined },
      initial: { username: undefined, password: 'A', sentinelPassword: undefined },
      onChange: (c) => changes.push(c),
      onError: () => undefined,
      pollMs: 50,
      debounceMs: 60_000,
    });
    watchers.push(w);
    writeFileSync(file, 'B');
    await waitUntil('the poll to see the change', () => changes.length === 1);
    expect(changes[0]?.password).toBe('B');
  });
});
