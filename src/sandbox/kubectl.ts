/**
 * Running kubectl, as a user would, against the sandbox's cluster.
 */
import { spawn } from 'node:child_process';

import { CommandFailedError } from './errors.js';

/** Which kubectl, and which kubeconfig it uses. */
export interface Kubectl {
  /** Absolute path of the kubectl binary. */
  readonly binary: string;
  /** The kubeconfig passed with `--kubeconfig`. */
  readonly kubeconfig: string;
}

/** Options of one kubectl run. */
export interface KubectlRunOptions {
  /** Written to kubectl's stdin (for `-f -`). */
  readonly input?: string;
  /** Kill kubectl after this many milliseconds (default 120 000). */
  readonly timeoutMs?: number;
}

/**
 * Runs `kubectl --kubeconfig <kubeconfig> <args>` to completion.
 *
 * @returns kubectl's stdout
 * @throws CommandFailedError when kubectl exits non-zero, is killed, or cannot be started; the
 *   message carries its stderr
 */
export function runKubectl(
  kubectl: Kubectl,
  args: readonly string[],
  options: KubectlRunOptions = {},
): Promise<string> {
  const fullArgs = ['--kubeconfig', kubectl.kubeconfig, ...args];
  const commandLine = `kubectl ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    const child = spawn(kubectl.binary, fullArgs, {
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 120_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (err) => {
      reject(new CommandFailedError(commandLine, null, err.message));
    });
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new CommandFailedError(commandLine, code, stderr.trim()));
    });
    child.stdin.end(options.input ?? '');
  });
}
