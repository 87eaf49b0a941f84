import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { SandboxError } from './errors.js';
import { customDomainsIn, manifestFiles, projectsIn } from './examples.js';

const EXAMPLES_DIR = fileURLToPath(new URL('../../examples', import.meta.url));

describe('projectsIn', () => {
  it('finds the Projects with their primary and redirect hostnames, and skips other kinds', () => {
    const yaml = `
kind: CustomDomain
metadata: {name: www, namespace: shop}
spec: {hostname: www.example.com, service: {name: web}}
---
kind: Project
metadata: {name: blog, namespace: blog}
spec: {service: {name: web}, domains: {primary: www.blog.example, redirects: [{from: blog.example}, {from: old.example, status: 308}]}}
---
kind: Project
metadata: {name: twin, namespace: blog}
spec: {service: {name: web}, domains: {primary: twin.example, wwwRedirect: true}}
`;
    expect(projectsIn(yaml, 'inline')).toEqual([
      { namespace: 'blog', name: 'blog', hostnames: ['www.blog.example', 'blog.example', 'old.example'] },
      { namespace: 'blog', name: 'twin', hostnames: ['twin.example', 'www.twin.example'] },
    ]);
  });

  it('names the file when a Project has no primary', () => {
    expect(() => projectsIn('kind: Project\nmetadata: {name: p}\nspec: {domains: {}}\n', 'bad.yaml')).toThrow(
      /bad\.yaml/,
    );
  });

  it('reads the Project of examples/', async () => {
    const text = await readFile(`${EXAMPLES_DIR}/04-blog-project.yaml`, 'utf8');
    expect(projectsIn(text, 'examples').map((p) => p.name)).toEqual(['blog']);
  });
});

describe('customDomainsIn', () => {
  it('finds the CustomDomains of a multi-document manifest and skips other kinds', () => {
    const yaml = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: portico.dev/v1alpha1
kind: CustomDomain
metadata: {name: www, namespace: shop}
spec: {hostname: www.example.com, service: {name: web}}
---
apiVersion: portico.dev/v1alpha1
kind: CustomDomain
metadata: {name: apex}
spec: {hostname: example.com, redirect: {to: www.example.com}}
`;
    expect(customDomainsIn(yaml, 'inline')).toEqual([
      { namespace: 'shop', name: 'www', hostname: 'www.example.com' },
      { namespace: 'default', name: 'apex', hostname: 'example.com' },
    ]);
  });

  it('names the file when a CustomDomain has no hostname', () => {
    const yaml = 'kind: CustomDomain\nmetadata: {name: broken}\nspec: {}\n';
    expect(() => customDomainsIn(yaml, 'bad.yaml')).toThrow(SandboxError);
    expect(() => customDomainsIn(yaml, 'bad.yaml')).toThrow(/bad\.yaml/);
  });

  it('rejects invalid YAML with the file name', () => {
    expect(() => customDomainsIn('kind: [unclosed', 'broken.yaml')).toThrow(/broken\.yaml: invalid YAML/);
  });
});

describe('examples/', () => {
  it('holds the two shop domains the README describes', async () => {
    const domains = [];
    for (const file of await manifestFiles(EXAMPLES_DIR)) {
      domains.push(...customDomainsIn(await readFile(file, 'utf8'), file));
    }
    expect(domains).toEqual([
      { namespace: 'shop', name: 'www-shop-example', hostname: 'www.shop.example' },
      { namespace: 'shop', name: 'docs-shop-example', hostname: 'docs.shop.example' },
    ]);
  });
});
