import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CUSTOM_DOMAIN_REASONS } from '../api/reasons.js';
import { fillPlaceholders, REASON_FIXES } from './fixes.js';

const doc = readFileSync(new URL('../../docs/troubleshooting.md', import.meta.url), 'utf8');
const index = doc.slice(doc.indexOf('## Reason index'));
/** The reason index's rows by reason: the cells after the first. */
const rows = new Map(
  index
    .split('\n')
    .map((line) => /^\| `([A-Za-z]+)` \|(.*)\|$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1] ?? '', (m[2] ?? '').split(' | ').map((cell) => cell.trim())]),
);
const catalogued = Object.keys(CUSTOM_DOMAIN_REASONS);

describe('the fixes and docs/troubleshooting.md', () => {
  it('has a fix for every reason in the catalogue, and none for a reason it lacks', () => {
    expect(catalogued.filter((r) => REASON_FIXES[r] === undefined)).toEqual([]);
    expect(Object.keys(REASON_FIXES).filter((r) => !catalogued.includes(r))).toEqual([]);
  });

  it('has a row in the reason index for every reason, and no other', () => {
    expect(index).not.toBe('');
    expect(catalogued.filter((r) => !rows.has(r))).toEqual([]);
    expect([...rows.keys()].filter((r) => !catalogued.includes(r))).toEqual([]);
  });

  it("gives in each row the reason's severity, its meaning and the plugin's fix, word for word", () => {
    for (const [reason, entry] of Object.entries(CUSTOM_DOMAIN_REASONS)) {
      const [, severity, meaning, fix] = rows.get(reason) ?? [];
      expect(severity, reason).toBe(entry.severity);
      expect(meaning, reason).toBe(entry.doc);
      expect(fix, reason).toBe(REASON_FIXES[reason]);
    }
  });

  it('writes fixes that fit a table cell, and fills in the domain', () => {
    for (const [reason, fix] of Object.entries(REASON_FIXES)) {
      expect(fix, reason).not.toMatch(/[|\n]/);
    }
    expect(
      fillPlaceholders(REASON_FIXES.NameInUse ?? '', {
        namespace: 'shop',
        name: 'www',
        hostname: 'www.shop.example',
      }),
    ).toContain('Ingress `portico-www`, Secret `www-tls`');
  });
});
