/**
 * Flags with environment fallbacks, shared by `portico controller` and `portico ratelimit-server`:
 * node:util's parseArgs (strict) for the command line, then the first non-empty environment
 * variable, then the default. The Helm chart sets the variables; `--help` prints each flag with
 * its variables and default.
 */
import { parseArgs } from 'node:util';

/** One flag of a command. */
export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  /** Environment variables read when the flag is absent, first non-empty one wins ('' or []: none). */
  readonly env: string | readonly string[];
  readonly default?: string;
  readonly help: string;
}

/**
 * `--check-config` of `portico controller` and `portico ratelimit-server`: read and check the
 * configuration exactly as a start does (flags, variables, the files they name), then exit 0 without
 * starting, or 2 with the error a start would stop with. No variable sets it: a Pod whose environment
 * carried it would never run.
 */
export const CHECK_CONFIG_FLAG: FlagSpec = {
  type: 'boolean',
  env: '',
  help: 'check the configuration as a start does, then exit: 0 when valid, 2 with the error (no API server needed)',
};

/** The values of a command's flags. */
export interface FlagValues<Name extends string> {
  /**
   * The flag's value, else the first non-empty environment variable, else the default; `'true'`
   * for a boolean flag given on the command line.
   */
  readonly get: (name: Name) => string | undefined;
  /**
   * `get`, for a setting without which the command cannot run.
   *
   * @throws the error `missing` makes, naming the flag, its variables and its help, when there is
   *   no value (or only '')
   */
  readonly required: (name: Name) => string;
}

function envNames(spec: FlagSpec): readonly string[] {
  return (typeof spec.env === 'string' ? [spec.env] : spec.env).filter((e) => e !== '');
}

/**
 * Reads `args` against `specs`. Returns `{help: true}` when `--help` was given.
 *
 * @param missing makes the error `required` throws, from its message
 * @throws TypeError from parseArgs for an unknown flag or a flag without its value
 */
export function readFlags<Name extends string>(
  specs: Readonly<Record<Name, FlagSpec>>,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  missing: (message: string) => Error,
): FlagValues<Name> | { help: true } {
  const entries = Object.entries(specs) as [Name, FlagSpec][];
  const parsed = parseArgs({
    args: [...args],
    options: Object.fromEntries(entries.map(([name, spec]) => [name, { type: spec.type }])),
    strict: true,
  }).values as Partial<Record<string, string | boolean>>;
  if (parsed['help'] === true) return { help: true };
  const get = (name: Name): string | undefined => {
    const flag = parsed[name];
    if (typeof flag === 'string') return flag;
    if (flag === true) return 'true';
    for (const variable of envNames(specs[name])) {
      const value = env[variable];
      if (value !== undefined && value !== '') return value;
    }
    return specs[name].default;
  };
  const required = (name: Name): string => {
    const value = get(name);
    if (value === undefined || value === '') {
      const variables = envNames(specs[name]).map((e) => `$${e}`);
      const or = variables.length > 0 ? ` (or ${variables.join(', ')})` : '';
      throw missing(`--${name}${or} is required: ${specs[name].help}`);
    }
    return value;
  };
  return { get, required };
}

/** The flag reference `<command> --help` prints: one line per flag, with its default and variables. */
export function flagUsage(command: string, specs: Readonly<Record<string, FlagSpec>>): string {
  const lines = Object.entries(specs).map(([name, spec]) => {
    const variables = envNames(spec);
    const env = variables.length > 0 ? ` [${variables.map((e) => `$${e}`).join(', ')}]` : '';
    const def = spec.default !== undefined ? ` (default ${spec.default})` : '';
    return `  --${name.padEnd(24)} ${spec.help}${def}${env}`;
  });
  return `usage: ${command} [flags]\n\n${lines.join('\n')}\n`;
}
