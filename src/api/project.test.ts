import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { HOSTNAME_RULES, MAX_HOSTNAME_LENGTH } from '../domain/hostname.js';
import { MAX_PROJECT_HOSTNAMES } from './project.js';

interface Field {
  maxLength?: number;
  'x-kubernetes-validations'?: { rule: string; message: string }[];
}
interface ProjectCrd {
  spec: {
    versions: {
      schema: {
        openAPIV3Schema: {
          properties: {
            spec: {
              properties: {
                domains: {
                  'x-kubernetes-validations': { rule: string; message: string }[];
                  properties: {
                    primary: Field;
                    redirects: { maxItems: number; items: { properties: { from: Field; to: Field } } };
                  };
                };
              };
            };
          };
        };
      };
    }[];
  };
}

describe('crds/portico.dev_projects.yaml', () => {
  const crd = parse(
    readFileSync(new URL('../../crds/portico.dev_projects.yaml', import.meta.url), 'utf8'),
  ) as ProjectCrd;
  const domains = crd.spec.versions[0]?.schema.openAPIV3Schema.properties.spec.properties.domains;
  const expected = HOSTNAME_RULES.map(({ cel, message }) => ({ rule: cel, message }));
  const fields = [
    domains?.properties.primary,
    domains?.properties.redirects.items.properties.from,
    domains?.properties.redirects.items.properties.to,
  ];

  it('has the hostname rules of src/domain/hostname.ts on primary, redirects[].from and redirects[].to, in order', () => {
    for (const field of fields) expect(field?.['x-kubernetes-validations']).toEqual(expected);
  });

  it('bounds the hostnames and the list so that the API server can bound the CEL cost', () => {
    for (const field of fields) {
      expect(field?.maxLength).toBeGreaterThan(MAX_HOSTNAME_LENGTH);
      expect(field?.maxLength).toBeLessThanOrEqual(1024);
    }
    expect(domains?.properties.redirects.maxItems).toBeGreaterThanOrEqual(MAX_PROJECT_HOSTNAMES);
  });

  it('states MAX_PROJECT_HOSTNAMES in the rule and the message of the maximum', () => {
    const rule = domains?.['x-kubernetes-validations'].find((r) => r.message.includes('at most'));
    expect(rule?.rule).toContain(`<= ${MAX_PROJECT_HOSTNAMES}`);
    expect(rule?.message).toContain(`at most ${MAX_PROJECT_HOSTNAMES} hostnames`);
  });
});
