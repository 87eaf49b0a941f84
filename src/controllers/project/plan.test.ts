import { describe, expect, it } from 'vitest';
import type { CustomDomain, CustomDomainSpec } from '../../api/customdomain.js';
import type { Project, ProjectSpec } from '../../api/project.js';
import { wwwCounterpart } from '../../api/project.js';
import { customDomainName, planProject, wantedHostnames, type DomainAction } from './plan.js';

const UID = 'project-uid';

function project(domains: ProjectSpec['domains']): Project {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'Project',
    metadata: { name: 'shop', namespace: 'shop', uid: UID, generation: 1 },
    spec: { service: { name: 'web', port: 80 }, domains },
  };
}

/** A CustomDomain the Project controls (or `owner`), Live for its generation when `live`. */
function domain(
  name: string,
  spec: CustomDomainSpec,
  options: { live?: boolean; owner?: string | null; generation?: number } = {},
): CustomDomain {
  const generation = options.generation ?? 1;
  const owner = options.owner === undefined ? UID : options.owner;
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: {
      name,
      namespace: 'shop',
      uid: `uid-${name}`,
      generation,
      labels: { 'portico.dev/project': 'shop' },
      ...(owner === null
        ? {}
        : {
            ownerReferences: [
              {
                apiVersion: 'portico.dev/v1alpha1',
                kind: 'Project',
                name: 'shop',
                uid: owner,
                controller: true,
              },
            ],
          }),
    },
    spec,
    status: {
      phase: options.live ? 'Live' : 'AwaitingDNS',
      conditions: [
        {
          type: 'Ready',
          status: options.live ? 'True' : 'False',
          reason: options.live ? 'Live' : 'RecordNotFound',
          message: '',
          observedGeneration: generation,
          lastTransitionTime: '2026-11-29T00:00:00Z',
        },
      ],
    },
  };
}

const serve = (hostname: string): CustomDomainSpec => ({ hostname, service: { name: 'web', port: 80 } });
const redirect = (
  hostname: string,
  to: string,
  statusCode: 301 | 302 | 307 | 308 = 301,
): CustomDomainSpec => ({
  hostname,
  redirect: { to, statusCode },
});
const exists = (): boolean => true;

function specs(actions: DomainAction[]): Record<string, CustomDomainSpec | 'deleted'> {
  const out: Record<string, CustomDomainSpec | 'deleted'> = {};
  for (const a of actions) {
    if (a.kind === 'delete') out[a.name] = 'deleted';
    else out[a.object.metadata.name] = a.object.spec;
  }
  return out;
}

describe('customDomainName', () => {
  it('is the hostname up to 63 characters', () => {
    expect(customDomainName('www.shop.example')).toBe('www.shop.example');
  });

  it('is 54 characters and a hash above, different for hostnames that share the first 54', () => {
    const a = `${'a'.repeat(60)}.example`;
    const b = `${'a'.repeat(60)}.example2`;
    expect(customDomainName(a)).toMatch(/^a{54}-[0-9a-f]{8}$/);
    expect(customDomainName(a)).not.toBe(customDomainName(b));
    expect(customDomainName(a).length).toBeLessThanOrEqual(63);
  });
});

describe('wantedHostnames', () => {
  it('lists the primary first, then each redirect with to defaulting to the primary and status 301', () => {
    expect(
      wantedHostnames(
        project({
          primary: 'shop.example',
          redirects: [{ from: 'old.example' }, { from: 'b.example', to: 'shop.example', status: 308 }],
        }),
      ),
    ).toEqual([
      { hostname: 'shop.example', role: 'Primary' },
      { hostname: 'old.example', role: 'Redirect', to: 'shop.example', status: 301 },
      { hostname: 'b.example', role: 'Redirect', to: 'shop.example', status: 308 },
    ]);
  });
});

describe('wantedHostnames with wwwRedirect', () => {
  it('adds the www name of an apex primary as a 301 redirect, right after the primary', () => {
    expect(
      wantedHostnames(
        project({ primary: 'shop.example', wwwRedirect: true, redirects: [{ from: 'old.example' }] }),
      ),
    ).toEqual([
      { hostname: 'shop.example', role: 'Primary' },
      { hostname: 'www.shop.example', role: 'Redirect', to: 'shop.example', status: 301 },
      { hostname: 'old.example', role: 'Redirect', to: 'shop.example', status: 301 },
    ]);
  });

  it('adds the apex of a www primary', () => {
    expect(
      wantedHostnames(project({ primary: 'www.shop.example', wwwRedirect: true })).map((w) => w.hostname),
    ).toEqual(['www.shop.example', 'shop.example']);
  });

  it('adds nothing without it', () => {
    expect(wantedHostnames(project({ primary: 'www.shop.example', wwwRedirect: false }))).toHaveLength(1);
  });

  it('switches an apex primary with its www twin to the www name without a gap', () => {
    // Was: primary shop.example, wwwRedirect (www.shop.example → shop.example). Now: the www primary.
    const plan = planProject(
      project({ primary: 'www.shop.example', wwwRedirect: true }),
      [
        domain('shop.example', serve('shop.example'), { live: true }),
        domain('www.shop.example', redirect('www.shop.example', 'shop.example'), { live: true }),
      ],
      { projectExists: exists },
    );
    expect(specs(plan.actions)).toEqual({ 'www.shop.example': serve('www.shop.example') });
    expect(plan.domains.map((d) => [d.hostname, d.role])).toEqual([
      ['www.shop.example', 'Primary'],
      ['shop.example', 'FormerPrimary'],
    ]);
  });
});

describe('wwwCounterpart', () => {
  it.each([
    ['shop.example', 'www.shop.example'],
    ['www.shop.example', 'shop.example'],
    ['www.com', undefined],
  ])('%s -> %s', (primary, twin) => {
    expect(wwwCounterpart(primary)).toBe(twin);
  });
});

describe('planProject', () => {
  it('creates one CustomDomain per hostname, controlled by the Project and labelled with its name', () => {
    const plan = planProject(
      project({ primary: 'shop.example', redirects: [{ from: 'old.example', status: 302 }] }),
      [],
      {
        projectExists: exists,
      },
    );
    expect(specs(plan.actions)).toEqual({
      'shop.example': serve('shop.example'),
      'old.example': redirect('old.example', 'shop.example', 302),
    });
    const created = plan.actions[0];
    expect(created?.kind).toBe('create');
    if (created?.kind !== 'create') return;
    expect(created.object.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'portico.dev/v1alpha1',
        kind: 'Project',
        name: 'shop',
        uid: UID,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(created.object.metadata.labels?.['portico.dev/project']).toBe('shop');
    expect(plan.ready).toMatchObject({ status: 'False', reason: 'PrimaryNotLive' });
    expect(plan.servingPrimary).toBeUndefined();
  });

  it('is Ready, with nothing to do, when every CustomDomain is as the spec says and Live', () => {
    const plan = planProject(
      project({ primary: 'shop.example', redirects: [{ from: 'old.example' }] }),
      [
        domain('shop.example', serve('shop.example'), { live: true }),
        domain('old.example', redirect('old.example', 'shop.example'), { live: true }),
      ],
      { projectExists: exists },
    );
    expect(plan.actions).toEqual([]);
    expect(plan.ready).toMatchObject({ status: 'True', reason: 'Live' });
    expect(plan.servingPrimary).toBe('shop.example');
    expect(plan.domains.map((d) => [d.hostname, d.role, d.ready])).toEqual([
      ['shop.example', 'Primary', 'True'],
      ['old.example', 'Redirect', 'True'],
    ]);
  });

  it('is not Ready while a redirect is not Live, and names it', () => {
    const plan = planProject(
      project({ primary: 'shop.example', redirects: [{ from: 'old.example' }] }),
      [
        domain('shop.example', serve('shop.example'), { live: true }),
        domain('old.example', redirect('old.example', 'shop.example')),
      ],
      { projectExists: exists },
    );
    expect(plan.ready).toMatchObject({ status: 'False', reason: 'RedirectsNotLive' });
    expect(plan.ready.message).toContain('old.example (RecordNotFound)');
  });

  it("names no Service on a redirect, and drops the one an earlier release wrote there (for Traefik's redirect route)", () => {
    const spec = project({ primary: 'shop.example', redirects: [{ from: 'old.example' }] });
    expect(specs(planProject(spec, [], { projectExists: exists }).actions)['old.example']).toEqual(
      redirect('old.example', 'shop.example'),
    );
    const earlier = domain(
      'old.example',
      { ...redirect('old.example', 'shop.example'), service: { name: 'web', port: 80 } },
      { live: true },
    );
    const plan = planProject(spec, [domain('shop.example', serve('shop.example'), { live: true }), earlier], {
      projectExists: exists,
    });
    expect(specs(plan.actions)).toEqual({ 'old.example': redirect('old.example', 'shop.example') });
  });

  it('does not count a Ready condition written for an older generation', () => {
    const stale = domain('shop.example', serve('shop.example'), { live: true });
    stale.metadata.generation = 2;
    const plan = planProject(project({ primary: 'shop.example' }), [stale], { projectExists: exists });
    expect(plan.ready.status).toBe('False');
    expect(plan.domains[0]).toMatchObject({ ready: 'Unknown', reason: 'Updating' });
  });

  it('deletes the CustomDomain of a hostname taken out of the list', () => {
    const plan = planProject(
      project({ primary: 'shop.example' }),
      [
        domain('shop.example', serve('shop.example'), { live: true }),
        domain('old.example', redirect('old.example', 'shop.example'), { live: true }),
      ],
      { projectExists: exists },
    );
    expect(plan.actions).toEqual([{ kind: 'delete', name: 'old.example', uid: 'uid-old.example' }]);
  });

  it('adopts a CustomDomain without a controller, keeping its name and setting its spec', () => {
    const handMade = domain('www-shop', serve('old.example'), { owner: null, live: true });
    const plan = planProject(
      project({ primary: 'shop.example', redirects: [{ from: 'old.example' }] }),
      [domain('shop.example', serve('shop.example'), { live: true }), handMade],
      { projectExists: exists },
    );
    const update = plan.actions.find((a) => a.kind === 'update');
    expect(update?.kind === 'update' && update.object.metadata.name).toBe('www-shop');
    expect(update?.kind === 'update' && update.object.spec).toEqual(redirect('old.example', 'shop.example'));
    expect(update?.kind === 'update' && update.object.metadata.ownerReferences?.[0]?.uid).toBe(UID);
    expect(plan.actions.some((a) => a.kind === 'create')).toBe(false);
  });

  it('adopts a CustomDomain whose controller is a Project that no longer exists', () => {
    const orphan = domain('shop.example', serve('shop.example'), { owner: 'gone-uid', live: true });
    const plan = planProject(project({ primary: 'shop.example' }), [orphan], {
      projectExists: (uid) => uid === UID,
    });
    expect(plan.actions).toHaveLength(1);
    expect(plan.actions[0]?.kind).toBe('update');
  });

  it('reports, and never changes, a CustomDomain another object controls', () => {
    const theirs = domain('theirs', serve('old.example'), { owner: 'other-project', live: true });
    const plan = planProject(
      project({ primary: 'shop.example', redirects: [{ from: 'old.example' }] }),
      [domain('shop.example', serve('shop.example'), { live: true }), theirs],
      { projectExists: exists },
    );
    expect(plan.actions).toEqual([]);
    expect(plan.conflicted).toMatchObject({ status: 'True', reason: 'CustomDomainControlledElsewhere' });
    expect(plan.conflicted?.message).toContain('old.example');
    expect(plan.domains[1]).toMatchObject({
      hostname: 'old.example',
      customDomain: 'theirs',
      reason: 'ControlledElsewhere',
    });
    expect(plan.ready).toMatchObject({ status: 'False', reason: 'HostnameConflict' });
    // The rest goes on: the primary is Live and serves.
    expect(plan.servingPrimary).toBe('shop.example');
  });

  describe('switching the primary', () => {
    const switched = project({
      primary: 'new.example',
      redirects: [{ from: 'old.example' }, { from: 'r.example' }],
    });

    it('first makes the new primary serve; the former primary and the redirects stay as they are', () => {
      const plan = planProject(
        switched,
        [
          domain('old.example', serve('old.example'), { live: true }),
          domain('new.example', redirect('new.example', 'old.example'), { live: true }),
          domain('r.example', redirect('r.example', 'old.example'), { live: true }),
        ],
        { projectExists: exists },
      );
      expect(specs(plan.actions)).toEqual({ 'new.example': serve('new.example') });
      expect(plan.servingPrimary).toBe('old.example');
      expect(plan.ready).toMatchObject({ status: 'False', reason: 'PrimarySwitchPending' });
      expect(plan.domains.find((d) => d.hostname === 'old.example')?.role).toBe('FormerPrimary');
    });

    it('keeps the former primary serving while the new primary has not reported Live on its new spec', () => {
      const plan = planProject(
        switched,
        [
          domain('old.example', serve('old.example'), { live: true }),
          // Updated to serve (generation 2), its Ready still that of generation 1.
          {
            ...domain('new.example', serve('new.example'), { live: true }),
            metadata: { ...domain('new.example', serve('new.example')).metadata, generation: 2 },
          },
          domain('r.example', redirect('r.example', 'old.example'), { live: true }),
        ],
        { projectExists: exists },
      );
      expect(plan.actions).toEqual([]);
      expect(plan.servingPrimary).toBe('old.example');
    });

    it('then turns the former primary and the redirects to the new primary', () => {
      const plan = planProject(
        switched,
        [
          domain('old.example', serve('old.example'), { live: true }),
          domain('new.example', serve('new.example'), { live: true, generation: 2 }),
          domain('r.example', redirect('r.example', 'old.example'), { live: true }),
        ],
        { projectExists: exists },
      );
      expect(specs(plan.actions)).toEqual({
        'old.example': redirect('old.example', 'new.example'),
        'r.example': redirect('r.example', 'new.example'),
      });
      expect(plan.servingPrimary).toBe('new.example');
    });
  });
});
