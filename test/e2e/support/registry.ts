/**
 * An OCI registry on loopback for the e2e tests: CNCF Distribution's `registry` (built by
 * scripts/install-tools.sh --test into the tools cache), filesystem storage in a directory of the
 * caller's, plain HTTP on a free port of 127.0.0.1 (the sandbox's port picking). `npm run release
 * -- --registry oci://<host>/charts --plain-http` pushes the image and the chart to it, and `helm
 * install oci://<host>/charts/portico --plain-http` installs from it (README.md, "Install with
 * Helm").
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'yaml';
import { pickFreePorts } from '../../../src/sandbox/ports.js';
import { waitFor } from './cluster.js';
import { toolsBin } from './helm.js';

export interface LocalRegistry {
  /** `127.0.0.1:<port>`, as image references and `oci://` URLs name it. */
  host: string;
  /** `http://127.0.0.1:<port>`, for the registry API (`/v2/...`). */
  url: string;
  /** Stops the registry and waits for it to exit; its storage stays in the directory. */
  stop(): Promise<void>;
}

/**
 * Starts the registry with its storage and configuration in `dir` and waits until `GET /v2/`
 * answers 200.
 * @throws Error when it exits before answering (with its output), or does not answer in time.
 */
export async function startRegistry(dir: string): Promise<LocalRegistry> {
  const bin = await toolsBin();
  await mkdir(path.join(dir, 'storage'), { recursive: true });
  const { port } = await pickFreePorts({ port: 'tcp' });
  const host = `127.0.0.1:${String(port)}`;
  const config = path.join(dir, 'config.yml');
  await writeFile(
    config,
    stringify({
      version: 0.1,
      log: { level: 'warn' },
      storage: { filesystem: { rootdirectory: path.join(dir, 'storage') } },
      http: { addr: host },
    }),
  );
  const child = spawn(`${bin}/registry`, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = new Promise<void>((resolve) =>
    child.on('exit', () => {
      resolve();
    }),
  );
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const url = `http://${host}`;
  await waitFor(`the registry on ${host}`, async () => {
    if (gone) throw new Error(`the registry exited before it answered:\n${output}`);
    const res = await fetch(`${url}/v2/`).catch(() => undefined);
    return res?.status === 200 ? true : undefined;
  });
  return {
    host,
    url,
    stop: async () => {
      if (!gone) child.kill('SIGTERM');
      await exited;
    },
  };
}
