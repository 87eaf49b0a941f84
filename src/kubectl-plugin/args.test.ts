import { describe, expect, it } from 'vitest';
import { parsePluginArgs, resourceKind } from './args.js';

describe('parsePluginArgs', () => {
  it('reads a command, a name and the flags kubectl users type', () => {
    expect(parsePluginArgs(['status', 'www', '-n', 'shop', '-o', 'json'])).toEqual({
      kind: 'run',
      command: 'status',
      resource: 'CustomDomain',
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
      resource: 'CustomDomain',
      name: 'www',
      namespace: 'shop',
      kubeconfig: '/k',
      context: 'c',
    });
    expect(parsePluginArgs(['explain', 'www'])).toMatchObject({ namespace: undefined, output: 'text' });
  });

  it.each([
    [['status', 'ratelimitpolicy', 'api'], 'RateLimitPolicy', 'api'],
    [['status', 'rlp/api', '-o', 'yaml'], 'RateLimitPolicy', 'api'],
    [['status', 'RateLimitPolicies.portico.dev', 'api'], 'RateLimitPolicy', 'api'],
    [['status', 'project', 'site'], 'Project', 'site'],
    [['status', 'proj/site'], 'Project', 'site'],
    [['status', 'projects.portico.dev/site'], 'Project', 'site'],
    [['status', 'cd', 'www'], 'CustomDomain', 'www'],
    [['explain', 'customdomain/www'], 'CustomDomain', 'www'],
    [['status', 'customdomain', 'project'], 'CustomDomain', 'project'],
  ])('reads the TYPE NAME and TYPE/NAME forms: %j', (argv, resource, name) => {
    expect(parsePluginArgs(argv)).toMatchObject({ kind: 'run', resource, name });
  });

  it('takes -o yaml and -o json for status of every kind', () => {
    expect(parsePluginArgs(['status', 'www', '-o', 'yaml'])).toMatchObject({ output: 'yaml' });
    expect(parsePluginArgs(['status', 'project', 'site', '--output=json'])).toMatchObject({
      resource: 'Project',
      output: 'json',
    });
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
    [['status', 'project'], 'status: no Project name given'],
    [['status', 'rlp'], 'status: no RateLimitPolicy name given'],
    [['status', 'project/'], 'status: no Project name given'],
    [['status', 'a', 'b'], 'status: unknown resource type "a"'],
    [['status', 'pods/web'], 'unknown resource type "pods"'],
    [['status', 'project', 'a', 'b'], 'unexpected argument "b"'],
    [['status', 'project', 'a/b'], '"a/b" is not a name'],
    [['status', 'www', '--all'], "Unknown option '--all'"],
    [['status', 'www', '-o', 'wide'], 'the output format is text, json or yaml'],
    [['verify', 'www', '-o', 'json'], 'only status prints json'],
    [['explain', 'www', '-o', 'yaml'], 'only status prints yaml'],
    [['verify', 'project', 'site'], 'verify: works on CustomDomains only, not on a Project'],
    [['explain', 'rlp/api'], 'explain: works on CustomDomains only, not on a RateLimitPolicy'],
  ])('refuses %j as a usage error', (argv, message) => {
    const parsed = parsePluginArgs(argv);
    expect(parsed.kind).toBe('usage-error');
    expect(parsed.kind === 'usage-error' ? parsed.message : '').toContain(message);
  });
});

describe('resourceKind', () => {
  it('knows the names the CRDs declare and nothing else', () => {
    expect(resourceKind('CD')).toBe('CustomDomain');
    expect(resourceKind('customdomains.portico.dev')).toBe('CustomDomain');
    expect(resourceKind('rlp')).toBe('RateLimitPolicy');
    expect(resourceKind('proj')).toBe('Project');
    expect(resourceKind('hostnameclaim')).toBeUndefined();
    expect(resourceKind('projects.example.com')).toBeUndefined();
  });
});
