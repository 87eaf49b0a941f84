/**
 * Redis credentials read from files (`--redis-username-file`, `--redis-password-file`,
 * `--redis-sentinel-password-file`) and read again when they change, so that a rotated password is
 * used without a restart: from the next connection on (a reconnect, a new cluster node, the primary
 * after a failover, each connection to a sentinel). Connections already authenticated stay as they
 * are: Redis checks a password at AUTH only, so removing one with `ACL SETUSER user <password` leaves
 * the connections opened with it authenticated (Redis's documentation, "ACL"; seen in
 * test/e2e/ratelimit-redis-credentials.test.ts). Rotation procedure: docs/ratelimits.md, "Rotating the
 * Redis password".
 *
 * A Kubernetes Secret mounted as a volume is updated by the kubelet atomically: it writes the new
 * files into a new directory and swaps the `..data` symlink, so the inode of the file the path
 * resolved to never changes. Hence the directory of each file is watched (node:fs `watch`, which
 * sees the symlink's rename), every event is debounced, and the files are also read every
 * `pollMs` in case the file system gives no events (some network and overlay file systems do not).
 * A change is judged by the contents, never by the event.
 */
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** The files credentials are read from; an unset file: that credential does not come from a file. */
export interface RedisCredentialFiles {
  /** ACL username of the Redis nodes. */
  readonly usernameFile: string | undefined;
  /** Password of the Redis nodes. */
  readonly passwordFile: string | undefined;
  /** Password of the sentinels (their `requirepass` or ACL user's password). */
  readonly sentinelPasswordFile: string | undefined;
}

/** Credentials as read; a field is undefined when its file is not set. */
export interface RedisCredentials {
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly sentinelPassword: string | undefined;
}

/** The credential names, for logs (never the values). */
export type RedisCredentialName = keyof RedisCredentials;

/** How often the files are read even without a file-system event, ms. */
export const CREDENTIAL_POLL_INTERVAL_MS = 10_000;

/** How long after the last file-system event the files are read, ms (a Secret update is a burst). */
export const CREDENTIAL_DEBOUNCE_MS = 100;

/** An error reading a credential file: which credential and why. */
export class CredentialFileError extends Error {
  constructor(
    readonly credential: RedisCredentialName,
    readonly file: string,
    readonly reason: string,
  ) {
    super(`the Redis ${credential} file "${file}" cannot be used: ${reason}`);
    this.name = 'CredentialFileError';
  }
}

/**
 * The credential in a file's contents: the text without one trailing line break (`echo` and most
 * editors add one; a Secret made by `kubectl create secret --from-literal` has none).
 *
 * @throws Error when nothing is left (an empty password would be sent as AUTH with an empty one)
 */
export function credentialFromText(text: string): string {
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new Error('the file is empty');
  return value;
}

function entries(files: RedisCredentialFiles): [RedisCredentialName, string][] {
  const all: [RedisCredentialName, string | undefined][] = [
    ['username', files.usernameFile],
    ['password', files.passwordFile],
    ['sentinelPassword', files.sentinelPasswordFile],
  ];
  return all.filter((e): e is [RedisCredentialName, string] => e[1] !== undefined);
}

function failure(credential: RedisCredentialName, file: string, err: unknown): CredentialFileError {
  return new CredentialFileError(credential, file, err instanceof Error ? err.message : String(err));
}

/**
 * Reads the files that are set, at start (the process stops on a bad setting).
 *
 * @throws CredentialFileError naming the first credential whose file cannot be read or is empty
 */
export function readCredentialFilesSync(files: RedisCredentialFiles): RedisCredentials {
  const out: Record<string, string | undefined> = {};
  for (const [name, file] of entries(files)) {
    try {
      out[name] = credentialFromText(readFileSync(file, 'utf8'));
    } catch (err) {
      throw failure(name, file, err);
    }
  }
  return { username: out.username, password: out.password, sentinelPassword: out.sentinelPassword };
}

/**
 * Reads the files that are set.
 *
 * @throws CredentialFileError naming the first credential whose file cannot be read or is empty
 */
export async function readCredentialFiles(files: RedisCredentialFiles): Promise<RedisCredentials> {
  const read = await Promise.all(
    entries(files).map(async ([name, file]) => {
      try {
        return [name, credentialFromText(await readFile(file, 'utf8'))] as const;
      } catch (err) {
        throw failure(name, file, err);
      }
    }),
  );
  const out = Object.fromEntries(read) as Partial<Record<RedisCredentialName, string>>;
  return { username: out.username, password: out.password, sentinelPassword: out.sentinelPassword };
}

/** The credentials whose values differ (names only). */
export function changedCredentials(a: RedisCredentials, b: RedisCredentials): RedisCredentialName[] {
  return (['username', 'password', 'sentinelPassword'] as const).filter((k) => a[k] !== b[k]);
}

export interface CredentialWatcherOptions {
  readonly files: RedisCredentialFiles;
  /** The credentials in use now (read at start). */
  readonly initial: RedisCredentials;
  /** Called with the new credentials and the names of those that changed. */
  readonly onChange: (credentials: RedisCredentials, changed: readonly RedisCredentialName[]) => void;
  /** Called when a file cannot be read or is empty: the previous credentials stay in use. */
  readonly onError: (err: CredentialFileError) => void;
  /** Defaults: CREDENTIAL_POLL_INTERVAL_MS and CREDENTIAL_DEBOUNCE_MS. */
  readonly pollMs?: number;
  readonly debounceMs?: number;
}

/**
 * Watches the credential files (their directories, see the module's comment) and polls them; calls
 * `onChange` once per change of contents. A file that cannot be read calls `onError` once per
 * distinct error until it can be read again; the credentials in use do not change meanwhile.
 */
export class CredentialFileWatcher {
  readonly #options: CredentialWatcherOptions;
  readonly #watchers: FSWatcher[] = [];
  readonly #poll: NodeJS.Timeout;
  #current: RedisCredentials;
  #debounce: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  /** The read after the one in progress, shared by every call made during it. */
  #again: Promise<void> | undefined;
  #lastError = '';
  #closed = false;

  constructor(options: CredentialWatcherOptions) {
    this.#options = options;
    this.#current = options.initial;
    const dirs = new Set(entries(options.files).map(([, file]) => path.dirname(path.resolve(file))));
    for (const dir of dirs) {
      try {
        const w = watch(dir, { persistent: false }, () => {
          this.#schedule();
        });
        // A directory that goes away (or an fs without events) leaves the poll.
        w.on('error', () => {
          w.close();
        });
        this.#watchers.push(w);
      } catch {
        // No events here: the poll alone reads the files.
      }
    }
    this.#poll = setInterval(() => void this.check(), options.pollMs ?? CREDENTIAL_POLL_INTERVAL_MS);
    this.#poll.unref();
  }

  /** The credentials in use. */
  get current(): RedisCredentials {
    return this.#current;
  }

  #schedule(): void {
    if (this.#closed) return;
    if (this.#debounce !== undefined) clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#debounce = undefined;
      void this.check();
    }, this.#options.debounceMs ?? CREDENTIAL_DEBOUNCE_MS);
    this.#debounce.unref();
  }

  /**
   * Reads the files now. One read at a time: a call during a read resolves after a read that
   * started after the call (the next one, shared by every call made meanwhile), so what was written
   * before the call has been read when it resolves. Never rejects (a file that cannot be read goes
   * to `onError`).
   */
  check(): Promise<void> {
    if (this.#reading !== undefined) {
      this.#again ??= this.#reading.then(() => {
        this.#again = undefined;
        return this.#closed ? undefined : this.check();
      });
      return this.#again;
    }
    this.#reading = this.#read().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #read(): Promise<void> {
    let next: RedisCredentials;
    try {
      next = await readCredentialFiles(this.#options.files);
    } catch (err) {
      const e = err as CredentialFileError;
      if (!this.#closed && e.message !== this.#lastError) {
        this.#lastError = e.message;
        this.#options.onError(e);
      }
      return;
    }
    this.#lastError = '';
    if (this.#closed) return;
    const changed = changedCredentials(this.#current, next);
    if (changed.length === 0) return;
    this.#current = next;
    this.#options.onChange(next, changed);
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#poll);
    if (this.#debounce !== undefined) clearTimeout(this.#debounce);
    for (const w of this.#watchers) w.close();
  }
}
