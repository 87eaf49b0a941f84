/**
 * The command line of `kubectl portico` (kubectl passes every argument after the plugin's name).
 * Pure: parsing only, with node:util's parseArgs.
 */
import { parseArgs } from 'node:util';

export const USAGE = `usage: kubectl portico <command> <customdomain> [-n namespace] [flags]

Reads and nudges Portico's CustomDomains with your kubeconfig (as kubectl does).

commands:
  status   the domain's story: phase, conditions, DNS found vs wanted, certificate,
           next DNS check and certificate attempt, its last 10 Events
  verify   press the spec's Re-verify button: set portico.dev/verify-requested-at to now
  explain  the condition that holds the domain back, its reason, what it means and the fix

flags:
  -n, --namespace <ns>   the domain's namespace (default: the context's, else "default")
  -o, --output <format>  status only: text (default) or json
      --kubeconfig <path> kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)
      --context <name>   kubeconfig context (default: the current context)
  -h, --help             this help
      --version          the plugin's version and commit

exit codes: 0 done, 1 error (e.g. the domain was not found), 2 usage
`;

export const COMMANDS = ['status', 'verify', 'explain'] as const;
export type Command = (typeof COMMANDS)[number];

/** A parsed command line. */
export type PluginArgs =
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'usage-error'; message: string }
  | {
      kind: 'run';
      command: Command;
      name: string;
      namespace: string | undefined;
      kubeconfig: string | undefined;
      context: string | undefined;
      output: 'text' | 'json';
    };

function isCommand(value: string | undefined): value is Command {
  return (COMMANDS as readonly string[]).includes(value ?? '');
}

/**
 * Parses `argv` (the arguments after `kubectl portico`). Never throws: an unknown flag, a missing or
 * extra argument, or a bad `-o` is a `usage-error` with a message for the user.
 */
export function parsePluginArgs(argv: readonly string[]): PluginArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        namespace: { type: 'string', short: 'n' },
        output: { type: 'string', short: 'o' },
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean' },
      },
    });
  } catch (err) {
    return { kind: 'usage-error', message: err instanceof Error ? err.message : String(err) };
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help' };
  if (values.version) return { kind: 'version' };
  const [command, name, ...extra] = positionals;
  if (!isCommand(command)) {
    return {
      kind: 'usage-error',
      message: command === undefined ? 'no command given' : `unknown command "${command}"`,
    };
  }
  if (name === undefined || name === '')
    return { kind: 'usage-error', message: `${command}: no CustomDomain name given` };
  if (extra.length > 0)
    return { kind: 'usage-error', message: `${command}: unexpected argument "${extra.join(' ')}"` };
  const output = values.output ?? 'text';
  if (output !== 'text' && output !== 'json') {
    return { kind: 'usage-error', message: `-o ${output}: the output format is text or json` };
  }
  if (output === 'json' && command !== 'status') {
    return { kind: 'usage-error', message: `-o json: only status prints JSON` };
  }
  return {
    kind: 'run',
    command,
    name,
    namespace: values.namespace,
    kubeconfig: values.kubeconfig,
    context: values.context,
    output,
  };
}
