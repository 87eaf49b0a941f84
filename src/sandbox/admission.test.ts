import { readFile } from 'node:fs/promises';

import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

import { SandboxError } from './errors.js';
import {
  APPS_DOMAIN_ADMISSION_MANIFEST,
  APPS_DOMAIN_PLACEHOLDER,
  SANDBOX_INGRESS_CLASS,
  admissionManifests,
  appsDomainAdmission,
} from './admission.js';

describe('admissionManifests', () => {
  it('keeps every ValidatingAdmissionPolicy and binding, in order, and nothing else', () => {
    const text = [
      '---',
      'apiVersion: v1',
      'kind: ServiceAccount',
      'metadata: {name: a}',
      '---',
      'apiVersion: admissionregistration.k8s.io/v1',
      'kind: ValidatingAdmissionPolicy',
      'metadata: {name: p1}',
      '---',
      '# only a comment',
      '---',
      'apiVersion: admissionregistration.k8s.io/v1',
      'kind: ValidatingAdmissionPolicyBinding',
      'metadata: {name: p1}',
      '---',
      'apiVersion: admissionregistration.k8s.io/v1',
      'kind: ValidatingAdmissionPolicy',
      'metadata: {name: p2}',
    ].join('\n');
    expect(admissionManifests(text, 'x.yaml').map((m) => `${m.kind}/${m.metadata.name}`)).toEqual([
      'ValidatingAdmissionPolicy/p1',
      'ValidatingAdmissionPolicyBinding/p1',
      'ValidatingAdmissionPolicy/p2',
    ]);
  });

  it('throws a SandboxError naming render-deploy.sh when the file holds no policy', () => {
    expect(() => admissionManifests('kind: ConfigMap\nmetadata: {name: a}\n', 'x.yaml')).toThrow(
      SandboxError,
    );
    expect(() => admissionManifests('', 'x.yaml')).toThrow(/render-deploy\.sh/);
  });

  it('throws on YAML that does not parse', () => {
    expect(() => admissionManifests('kind: [unclosed\n', 'x.yaml')).toThrow(/not valid YAML/);
  });
});

describe('SANDBOX_INGRESS_CLASS', () => {
  it("is the chart's default routing.ingress.className", async () => {
    const values = parse(
      await readFile(new URL('../../charts/portico/values.yaml', import.meta.url), 'utf8'),
    ) as {
      routing: { ingress: { className: string } };
    };
    expect(SANDBOX_INGRESS_CLASS).toBe(values.routing.ingress.className);
  });
});

describe('appsDomainAdmission', () => {
  const rendered = (): Promise<string> =>
    readFile(new URL(`../../${APPS_DOMAIN_ADMISSION_MANIFEST}`, import.meta.url), 'utf8');
  const variablesOf = (m: unknown): { name: string; expression: string }[] =>
    (m as { spec?: { variables?: { name: string; expression: string }[] } }).spec?.variables ?? [];

  it("puts the apps domain in the policy's appsDomain variable of the rendered file, and nowhere else holds the placeholder", async () => {
    const text = await rendered();
    expect(text).toContain(`'${APPS_DOMAIN_PLACEHOLDER}'`);
    const manifests = appsDomainAdmission(text, 'f.yaml', 'apps.portico.test');
    expect(manifests.map((m) => `${m.kind}/${m.metadata.name}`)).toEqual([
      'ValidatingAdmissionPolicy/portico-controller-apps-domain-routes',
      'ValidatingAdmissionPolicyBinding/portico-controller-apps-domain-routes',
    ]);
    expect(variablesOf(manifests[0]).find((v) => v.name === 'appsDomain')?.expression).toBe(
      "'apps.portico.test'",
    );
    expect(JSON.stringify(manifests)).not.toContain(APPS_DOMAIN_PLACEHOLDER);
    // The message names the domain through the variable, not a copy of it.
    expect(JSON.stringify(manifests)).toContain("', in the apps domain ' + variables.appsDomain");
  });

  it('refuses an apps domain that is not a hostname (it becomes a CEL string literal)', async () => {
    const text = await rendered();
    for (const bad of ["apps.example' || true || '", 'Apps.Example', 'apps..example', '']) {
      expect(() => appsDomainAdmission(text, 'f.yaml', bad), bad).toThrow(SandboxError);
    }
  });

  it('refuses a file whose policy has no placeholder variable, or the placeholder elsewhere', () => {
    const policy = (variables: string, message: string): string =>
      [
        'apiVersion: admissionregistration.k8s.io/v1',
        'kind: ValidatingAdmissionPolicy',
        'metadata: {name: p}',
        'spec:',
        `  variables: ${variables}`,
        `  validations: [{expression: 'false', message: "${message}"}]`,
      ].join('\n');
    expect(() =>
      appsDomainAdmission(
        policy('[{name: appsDomain, expression: "\'apps.x.example\'"}]', 'm'),
        'f.yaml',
        'a.example',
      ),
    ).toThrow(/render-deploy\.sh/);
    expect(() =>
      appsDomainAdmission(
        policy(`[{name: appsDomain, expression: "'${APPS_DOMAIN_PLACEHOLDER}'"}]`, APPS_DOMAIN_PLACEHOLDER),
        'f.yaml',
        'a.example',
      ),
    ).toThrow(/in the variable appsDomain of its policy alone/);
  });
});
