import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { Condition } from '../api/customdomain.js';
import type { Project } from '../api/project.js';
import type { RateLimitPolicy } from '../api/ratelimitpolicy.js';
import { delegationRecord, requiredDnsRecords } from '../dns/records.js';
import type { DomainEvent } from './format.js';
import {
  formatPolicyStatus,
  formatProjectStatus,
  otherStatusFields,
  policyReport,
  projectReport,
  serializeReport,
} from './resources.js';

const now = new Date('2026-03-01T12:00:00Z');

function cond(
  type: string,
  status: Condition['status'],
  reason: string,
  message = `${type} says ${reason}`,
): Condition {
  return { type, status, reason, message, lastTransitionTime: '2026-03-01T11:55:00Z' };
}

const event: DomainEvent = {
  type: 'Normal',
  reason: 'Enforced',
  message: 'every rate-limit server enforces generation 3',
  count: 2,
  lastSeen: new Date('2026-03-01T11:58:00Z'),
};

const policy: RateLimitPolicy = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { name: 'api', namespace: 'shop', uid: 'p-1', generation: 3 },
  spec: {
    targetRefs: [{ group: 'projectcontour.io', kind: 'HTTPProxy', name: 'api' }],
    plans: [
      { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
      { name: 'pro', requestsPerMinute: 600, requestsPerDay: 100_000 },
    ],
    defaultPlan: 'free',
    overrides: [{ keyId: 'key-42', requestsPerMinute: 5000, requestsPerDay: 1_000_000 }],
    ban: { afterRejectedRequests: 100, duration: '15m' },
  },
  status: {
    observedGeneration: 3,
    domain: 'shop/api',
    conditions: [
      cond('Attached', 'False', 'TargetNotFound', 'HTTPProxy api not found'),
      cond('Enforced', 'True', 'Loaded'),
      cond('Accepted', 'True', 'Valid'),
    ],
  },
};

describe('a RateLimitPolicy', () => {
  it('shows its domain, conditions in order, plans, override, ban, targets and Events', () => {
    const report = policyReport(policy, [event], now);
    expect(report.conditions.map((c) => c.type)).toEqual(['Accepted', 'Enforced', 'Attached']);
    expect(report.missingKeyId).toBe('LimitByRemoteAddress');
    expect(formatPolicyStatus(report)).toBe(
      [
        'RateLimitPolicy shop/api: domain shop/api (generation 3, observed 3)',
        '',
        'Conditions:',
        '  TYPE      STATUS  REASON          AGE',
        '  Accepted  True    Valid           5m',
        '      Accepted says Valid',
        '  Enforced  True    Loaded          5m',
        '      Enforced says Loaded',
        '  Attached  False   TargetNotFound  5m',
        '      HTTPProxy api not found',
        '',
        'Plans (default: free):',
        '  PLAN            PER MINUTE  PER DAY',
        '  free (default)  60          1000',
        '  pro             600         100000',
        'Overrides (replace the plan for one key):',
        '  KEY ID  PER MINUTE  PER DAY',
        '  key-42  5000        1000000',
        'Ban: a key that sends more than 100 requests while limited is banned for 15m',
        'Checks without key_id: LimitByRemoteAddress',
        'Targets:',
        '  projectcontour.io/HTTPProxy api',
        '',
        'Events (last 10, newest last):',
        '  AGE      TYPE    REASON    MESSAGE',
        '  2m (x2)  Normal  Enforced  every rate-limit server enforces generation 3',
        '',
      ].join('\n'),
    );
  });

  it('says what a minimal, unreconciled policy does: no ban, no override, wired by hand', () => {
    const bare: RateLimitPolicy = structuredClone(policy);
    delete bare.status;
    bare.spec = {
      plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }],
      defaultPlan: 'free',
      missingKeyId: 'Refuse',
    };
    const text = formatPolicyStatus(policyReport(bare, [], now));
    expect(text).toContain('RateLimitPolicy shop/api: domain shop/api (generation 3, observed -)');
    expect(text).toContain('Conditions: none reported yet');
    expect(text).toContain('Overrides: none');
    expect(text).toContain('Ban: none (keys are never banned)');
    expect(text).toContain('Checks without key_id: Refuse');
    expect(text).toContain('Targets: none (the gateway is wired by hand)');
    expect(text).toContain('Events: none');
  });
});

const primary = 'www.shop.example';
const apex = 'shop.example';
const project: Project = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'Project',
  metadata: { name: 'site', namespace: 'shop', uid: 'pr-1', generation: 4 },
  spec: {
    service: { name: 'web', port: 80 },
    domains: { primary, redirects: [{ from: apex, status: 308 }, { from: 'old.shop.example' }] },
  },
  status: {
    observedGeneration: 4,
    servingPrimary: primary,
    hostnameCount: 3,
    domains: [
      {
        hostname: primary,
        role: 'Primary',
        customDomain: primary,
        phase: 'Live',
        ready: 'True',
        reason: 'Live',
        message: 'serving',
        dnsRecords: requiredDnsRecords(primary, 'sites.example.net'),
      },
      {
        hostname: apex,
        role: 'Redirect',
        customDomain: apex,
        redirectTo: primary,
        statusCode: 308,
        phase: 'Pending',
        ready: 'False',
        reason: 'RecordMissing',
        message: 'no ALIAS at shop.example',
        dnsRecords: [...requiredDnsRecords(apex, 'sites.example.net', ['192.0.2.10'])],
      },
      { hostname: 'old.shop.example', role: 'Redirect', redirectTo: primary, statusCode: 301 },
    ],
    conditions: [cond('Ready', 'False', 'RedirectsNotLive', 'shop.example is not Live')],
  },
};

describe('a Project', () => {
  it("shows its primary, each hostname's role, phase and DNS record, and its Ready condition", () => {
    const report = projectReport(project, [], now);
    expect(report.redirects).toEqual([
      { from: apex, to: primary, status: 308 },
      { from: 'old.shop.example', to: primary, status: 301 },
    ]);
    expect(report.ready?.reason).toBe('RedirectsNotLive');
    expect(report.otherStatus).toEqual({});
    const text = formatProjectStatus(report);
    expect(text).toContain('Project shop/site (generation 4, observed 4)\n');
    expect(text).toContain(`Primary: ${primary} (serving)\n`);
    expect(text).toContain('Ready:   False, reason RedirectsNotLive: shop.example is not Live\n');
    expect(text).toContain('Service: web:80\n');
    expect(text).toContain(
      [
        'Hostnames (3):',
        '  HOSTNAME          ROLE      REDIRECTS TO            PHASE    READY  REASON',
        '  www.shop.example  Primary   -                       Live     True   Live',
        '  shop.example      Redirect  www.shop.example (308)  Pending  False  RecordMissing',
        '      no ALIAS at shop.example',
        '  old.shop.example  Redirect  www.shop.example (301)  -        -      -',
      ].join('\n'),
    );
    expect(text).toContain(`  ${primary}:\n    wanted:  CNAME ${primary} -> sites.example.net  (TTL 3600)\n`);
    expect(text).toMatch(/ {2}shop\.example:\n {4}wanted: {2}ALIAS shop\.example -> sites\.example\.net/);
    expect(text).toContain('or instead, without ALIAS/ANAME: A @ -> 192.0.2.10');
    expect(text).toContain('  old.shop.example:\n    (none listed yet)\n');
    expect(text).not.toContain('Other status');
  });

  it('shows a status field it does not know, as the operator wrote it, in text, JSON and YAML', () => {
    const newer = {
      ...project,
      status: { ...project.status, appsSubdomain: 'site-shop.apps.example.net', extra: { a: 1 } },
    } as Project;
    const report = projectReport(newer, [], now);
    expect(report.otherStatus).toEqual({ appsSubdomain: 'site-shop.apps.example.net', extra: { a: 1 } });
    expect(formatProjectStatus(report)).toContain(
      [
        'Other status (fields this plugin does not know, as the operator wrote them):',
        '  appsSubdomain:  site-shop.apps.example.net',
        '  extra:          {"a":1}',
      ].join('\n'),
    );
    const json = JSON.parse(serializeReport(report, 'json')) as typeof report;
    const yaml = parse(serializeReport(report, 'yaml')) as typeof report;
    expect(json).toEqual(yaml);
    expect(yaml.otherStatus['appsSubdomain']).toBe('site-shop.apps.example.net');
    expect(yaml.hostnames[1]?.dnsRecords[0]).toMatchObject({ type: 'ALIAS', name: apex });
  });

  it('names the listed hostnames and no serving primary before the operator reports', () => {
    const fresh = structuredClone(project);
    delete fresh.status;
    const text = formatProjectStatus(projectReport(fresh, [], now));
    expect(text).toContain(`Primary: ${primary} (none serves yet)`);
    expect(text).toContain('Ready:   not reported yet');
    expect(text).toContain(`Hostnames: not reported yet (listed: ${primary}, ${apex}, old.shop.example)`);
    expect(text).not.toContain('DNS records to create');
  });

  it('says which hostname serves while a new primary is not Live yet', () => {
    const switching = { ...project, status: { ...project.status, servingPrimary: apex } };
    expect(formatProjectStatus(projectReport(switching, [], now))).toContain(
      `Primary: ${primary} (${apex} serves until it is Live)`,
    );
  });

  it('shows the DNS-01 delegation record as one the customer may add', () => {
    const withDelegation = structuredClone(project);
    const first = withDelegation.status?.domains?.[0];
    if (first)
      first.dnsRecords = [...(first.dnsRecords ?? []), delegationRecord(primary, 'acme.example.net')];
    expect(formatProjectStatus(projectReport(withDelegation, [], now))).toContain(
      `    may add: CNAME _acme-challenge.${primary}`,
    );
  });
});

describe('otherStatusFields', () => {
  it('keeps only the fields not known, as written', () => {
    expect(otherStatusFields({ a: 1, b: [2], c: undefined }, ['a'])).toEqual({ b: [2], c: undefined });
    expect(otherStatusFields(undefined, ['a'])).toEqual({});
  });
});
