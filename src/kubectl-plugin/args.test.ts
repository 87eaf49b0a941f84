import { describe, expect, it } from 'vitest';
import { parsePluginArgs } from './args.js';

describe('parsePluginArgs', () => {
  it('reads a command, a name and the flags kubectl users type', () => {
    expect(parsePluginArgs(['status', 'www', '-n', 'shop', '-o', 'json'])).toEqual({
      kind: 'run',
      command: 'status',
      name: 'www',
      namespace: 'shop',
      kubeconfig: undefined,
      context: undefined,
      output: 'json',
    });
    expect(
      parsePluginArgs(['verify', '--namespace=shop', 'www', '--kubeconfig', '/k', '--context', 'c']),
    ).toMatchObject({
      kind: 'run',
      command: 'verify',
      name: 'www',
      namespace: 'shop',
      kubeconfig: '/k',
      context: 'c',
    });
    expect(parsePluginArgs(['explain', 'www'])).toMatchObject({ namespace: undefined, output: 'text' });
  });

  it('answers --help before anything else', () => {
    expect(parsePluginArgs(['--help'])).toEqual({ kind: 'help' });
    expect(parsePluginArgs(['status', '-h'])).toEqual({ kind: 'help' });
  });

  it('answers --version without a command', () => {
    expect(parsePluginArgs(['--version'])).toEqual({ kind: 'version' });
    expect(parsePluginArgs(['-h', '--version'])).toEqual({ kind: 'help' });
  });

  it.each([
    [[], 'no command given'],
    [['restart', 'www'], 'unknown command "restart"'],
    [['status'], 'status: no CustomDomain name given'],
    [['status', 'a', 'b'], 'unexpected argument "b"'],
    [['status', 'www', '--all'], "Unknown option '--all'"],
    [['status', 'www', '-o', 'yaml'], 'the output format is text or json'],
    [['verify', 'www', '-o', 'json'], 'only status prints JSON'],
  ])('refuses %j as a usage error', (argv, message) => {
    const parsed = parsePluginArgs(argv);
    expect(parsed.kind).toBe('usage-error');
    expect(parsed.kind === 'usage-error' ? parsed.message : '').toContain(message);
  });
});
