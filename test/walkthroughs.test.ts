/**
 * The walkthroughs' chart values (docs/walkthrough-contour.md, docs/walkthrough-envoy-gateway.md)
 * are the files of charts/portico/ci/ that test/e2e/helm.test.ts lints, renders, dry-runs against
 * the API server and checks the binaries' configuration with (`--check-config`): each doc's values
 * block parses to the same values as its file there, so the one a platform team copies is the one
 * tested.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const root = new URL('../', import.meta.url);

/** The YAML code block that follows the line "`<name>`:" in `doc`; throws when there is none. */
function valuesBlock(doc: string, name: string): unknown {
  const at = doc.indexOf(`\`${name}\`:\n\n\`\`\`yaml\n`);
  if (at < 0) throw new Error(`no values block for ${name}`);
  const start = doc.indexOf('```yaml\n', at) + '```yaml\n'.length;
  return parse(doc.slice(start, doc.indexOf('\n```', start)));
}

describe.each([
  ['walkthrough-contour.md', 'portico-contour.yaml', 'walkthrough-contour-values.yaml'],
  ['walkthrough-envoy-gateway.md', 'portico-envoy-gateway.yaml', 'walkthrough-envoy-gateway-values.yaml'],
])('docs/%s', (docFile, valuesName, ciFile) => {
  it(`gives the values of charts/portico/ci/${ciFile}`, () => {
    const doc = readFileSync(new URL(`docs/${docFile}`, root), 'utf8');
    const ci: unknown = parse(readFileSync(new URL(`charts/portico/ci/${ciFile}`, root), 'utf8'));
    expect(valuesBlock(doc, valuesName)).toEqual(ci);
  });
});
