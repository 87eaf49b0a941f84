import { readFile } from 'node:fs/promises';

import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

import { SandboxError } from './errors.js';
import { SANDBOX_INGRESS_CLASS, admissionManifests } from './admission.js';

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
