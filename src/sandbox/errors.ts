/**
 * Errors the sandbox throws. Every message names the component that failed and, where there is
 * one, the log file to read next.
 */

/** Base class of every sandbox error, so callers can tell sandbox failures from programming errors. */
export class SandboxError extends Error {
  override readonly name: string = 'SandboxError';
}

/** The tool builder (`scripts/install-tools.sh`) failed or printed no bin directory. */
export class ToolsInstallError extends SandboxError {
  override readonly name = 'ToolsInstallError';
}

/** A process of the stack could not be started, exited early, or did not become ready in time. */
export class ComponentStartError extends SandboxError {
  override readonly name = 'ComponentStartError';

  /**
   * @param component the component's name (`etcd`, `kube-apiserver`, ...)
   * @param reason what went wrong, without the component name
   * @param logPath the component's log file, when it has one
   */
  constructor(
    readonly component: string,
    reason: string,
    readonly logPath?: string,
  ) {
    super(`${component}: ${reason}${logPath === undefined ? '' : ` (log: ${logPath})`}`);
  }
}

/** A command the sandbox runs to completion (kubectl, the tool builder) exited non-zero. */
export class CommandFailedError extends SandboxError {
  override readonly name = 'CommandFailedError';

  /**
   * @param command the command line, for the message
   * @param exitCode the exit code, or null when a signal ended it
   * @param stderr what the command wrote to stderr (trimmed)
   */
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`"${command}" exited with ${exitCode ?? 'a signal'}${stderr === '' ? '' : `: ${stderr}`}`);
  }
}

/** A call to a management API (pebble-challtestsrv, Pebble) answered with an error. */
export class ManagementApiError extends SandboxError {
  override readonly name = 'ManagementApiError';
}

/** `<dir>/state.json` is missing or unreadable: the sandbox was never brought up there. */
export class SandboxNotFoundError extends SandboxError {
  override readonly name = 'SandboxNotFoundError';
}

/** The example CustomDomains did not all become Ready before the deadline. */
export class ExamplesNotReadyError extends SandboxError {
  override readonly name = 'ExamplesNotReadyError';
}
