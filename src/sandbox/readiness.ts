/**
 * Waiting for a started process to answer, and the HTTP(S) probes used for it.
 */
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

import { ComponentStartError } from './errors.js';
import { isAlive, type StartedProcess } from './processes.js';

/**
 * Request options of a probe: for https, the CA to trust and, for client-certificate auth, a cert
 * and key (PEM); headers (a bearer token) where a kubeconfig asks for them.
 */
export interface ProbeOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  headers?: Record<string, string>;
}

/** The User-Agent of every probe. */
export const USER_AGENT = 'portico-sandbox';

/** An HTTP answer. */
export interface ProbeAnswer {
  readonly status: number;
  readonly body: string;
}

/**
 * GETs `url` (http: or https:) and reads the whole body.
 *
 * @param timeoutMs the deadline for the whole request, in milliseconds
 * @throws Error on connection, TLS or timeout failures
 */
export function httpGet(url: string, options: ProbeOptions = {}, timeoutMs = 2000): Promise<ProbeAnswer> {
  const secure = url.startsWith('https:');
  return new Promise((resolve, reject) => {
    const onResponse = (res: http.IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    };
    // Pebble (like Let's Encrypt) rejects requests without a User-Agent.
    const headers = { 'user-agent': USER_AGENT, ...options.headers };
    const req = secure
      ? https.get(url, { agent: false, ...options, headers, timeout: timeoutMs }, onResponse)
      : http.get(url, { agent: false, headers, timeout: timeoutMs }, onResponse);
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/**
 * A probe for `waitUntilReady`: true when GET `url` answers `expectedStatus`, else a description of
 * what it answered (status and body, or the connection error).
 */
export function httpProbe(
  url: string,
  options: ProbeOptions = {},
  expectedStatus = 200,
): () => Promise<true | string> {
  return async () => {
    try {
      const answer = await httpGet(url, options);
      if (answer.status === expectedStatus) return true;
      return `GET ${url} answered ${answer.status}: ${answer.body.trim().slice(0, 300)}`;
    } catch (err: unknown) {
      return `GET ${url} failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  };
}

/** How long and how often `waitUntilReady` polls. */
export interface WaitOptions {
  /** The deadline, in milliseconds. */
  readonly timeoutMs: number;
  /** The pause between probes, in milliseconds (default 200). */
  readonly intervalMs?: number;
}

/**
 * Polls `probe` until it returns true. Stops early when the process exits.
 *
 * @param proc the process being waited for: its name and log go into the error
 * @param probe returns true when ready, else a description of the last state
 * @throws ComponentStartError when the process exits or the deadline passes; the message carries
 *   the probe's last description and the log path
 */
export async function waitUntilReady(
  proc: StartedProcess,
  probe: () => Promise<true | string>,
  options: WaitOptions,
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const last = await probe();
    if (last === true) return;
    if (!isAlive(proc.pid)) {
      throw new ComponentStartError(
        proc.name,
        `exited before it was ready (last probe: ${last})`,
        proc.logPath,
      );
    }
    if (Date.now() >= deadline) {
      const seconds = Math.round(options.timeoutMs / 1000);
      throw new ComponentStartError(
        proc.name,
        `not ready after ${seconds} s (last probe: ${last})`,
        proc.logPath,
      );
    }
    await sleep(options.intervalMs ?? 200);
  }
}
