/**
 * The command line of `kubectl portico` (kubectl passes every argument after the plugin's name).
 * Pure: parsing only, with node:util's parseArgs.
 */
import { parseArgs } from 'node:util';

export const USAGE = `usage: kubectl portico <command> [TYPE] NAME [-n namespace] [flags]
       kubectl portico <command> TYPE/NAME [-n namespace] [flags]

Reads and nudges Portico's objects with your kubeconfig (as kubectl does). TYPE is one of
customdomain (cd), ratelimitpolicy (rlp) or project (proj), plural or with .portico.dev as kubectl
takes them; without TYPE, NAME is a CustomDomain (a CustomDomain named like a TYPE needs
the TYPE: kubectl portico status customdomain project).

commands:
  status   customdomain: phase, conditions, DNS found vs wanted, certificate, next DNS check
             and certificate attempt, its last 10 Events
           ratelimitpolicy: its rate-limit domain, conditions (Accepted, Enforced, Attached),
             plans, overrides, ban, targets, its last 10 Events
           project: its primary and the one serving now, each hostname's role, phase and the
             DNS record to create, its Ready condition, every other status field, its Events
  verify   customdomain only: press the spec's Re-verify button (set
           portico.dev/verify-requested-at to now)
  explain  customdomain only: the condition that holds the domain back, its reason, what it
           means and the fix

flags:
  -n, --namespace <ns>   the object's namespace (default: the context's, else "default")
  -o, --output <format>  status only: text (default), json or yaml
      --kubeconfig <path> kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)
      --context <name>   kubeconfig context (default: the current context)
  -h, --help             this help
      --version          the plugin's version and commit

exit codes: 0 done, 1 error (e.g. the object was not found), 2 usage
`;

export const COMMANDS = ['status', 'verify', 'explain'] as const;
export type Command = (typeof COMMANDS)[number];

/** The kinds the plugin reads. */
export type ResourceKind = 'CustomDomain' | 'RateLimitPolicy' | 'Project';

/**
 * The names kubectl users type for each kind: singular, plural and the CRDs' short names
 * (crds/*.yaml `names`); resourceKind also takes each with `.portico.dev` after it, as kubectl
 * takes `customdomains.portico.dev`.
 */
export const RESOURCE_NAMES: Readonly<Record<ResourceKind, readonly string[]>> = {
  CustomDomain: ['customdomain', 'customdomains', 'cd', 'cdomain'],
  RateLimitPolicy: ['ratelimitpolicy', 'ratelimitpolicies', 'rlp'],
  Project: ['project', 'projects', 'proj'],
};

export const OUTPUTS = ['text', 'json', 'yaml'] as const;
export type Output = (typeof OUTPUTS)[number];

/** A parsed command line. */
export type PluginArgs =
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'usage-error'; message: string }
  | {
      kind: 'run';
      command: Command;
      resource: ResourceKind;
      name: string;
      namespace: string | undefined;
      kubeconfig: string | undefined;
      context: string | undefined;
      output: Output;
    };

function isCommand(value: string | undefined): value is Command {
  return (COMMANDS as readonly string[]).includes(value ?? '');
}

/**
 * The kind a TYPE argument names (case-insensitive, with or without `.portico.dev`); undefined for
 * any other. Pure.
 */
export function resourceKind(type: string): ResourceKind | undefined {
  const bare = type.toLowerCase().replace(/\.portico\.dev$/, '');
  return (Object.keys(RESOURCE_NAMES) as ResourceKind[]).find((k) => RESOURCE_NAMES[k].includes(bare));
}

/** `[TYPE] NAME` or `TYPE/NAME` to a kind and a name; a string is the usage error. */
function target(
  command: Command,
  positionals: readonly string[],
): { resource: ResourceKind; name: string } | string {
  const [first, second, ...extra] = positionals;
  if (extra.length > 0) return `${command}: unexpected argument "${extra.join(' ')}"`;
  let type: string | undefined;
  let name: string | undefined;
  if (second !== undefined) [type, name] = [first, second];
  else if (first?.includes('/'))
    [type, name] = [first.slice(0, first.indexOf('/')), first.slice(first.indexOf('/') + 1)];
  else if (first !== undefined && resourceKind(first) !== undefined) type = first;
  else name = first;
  const resource = type === undefined ? 'CustomDomain' : resourceKind(type);
  if (resource === undefined) {
    return `${command}: unknown resource type "${type ?? ''}" (known: customdomain, ratelimitpolicy, project)`;
  }
  if (name === undefined || name === '') {
    return `${command}: no ${type === undefined ? 'CustomDomain' : resource} name given`;
  }
  if (name.includes('/')) return `${command}: "${name}" is not a name`;
  return { resource, name };
}

/**
 * Parses `argv` (the arguments after `kubectl portico`). Never throws: an unknown flag, a missing or
 * extra argument, an unknown TYPE, a command the TYPE has not, or a bad `-o` is a `usage-error`
 * with a message for the user.
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
  const [command, ...rest] = positionals;
  if (!isCommand(command)) {
    return {
      kind: 'usage-error',
      message: command === undefined ? 'no command given' : `unknown command "${command}"`,
    };
  }
  const found = target(command, rest);
  if (typeof found === 'string') return { kind: 'usage-error', message: found };
  if (command !== 'status' && found.resource !== 'CustomDomain') {
    return {
      kind: 'usage-error',
      message: `${command}: works on CustomDomains only, not on a ${found.resource}`,
    };
  }
  const output = values.output ?? 'text';
  if (!(OUTPUTS as readonly string[]).includes(output)) {
    return { kind: 'usage-error', message: `-o ${output}: the output format is text, json or yaml` };
  }
  if (output !== 'text' && command !== 'status') {
    return { kind: 'usage-error', message: `-o ${output}: only status prints ${output}` };
  }
  return {
    kind: 'run',
    command,
    ...found,
    namespace: values.namespace,
    kubeconfig: values.kubeconfig,
    context: values.context,
    output: output as Output,
  };
}
