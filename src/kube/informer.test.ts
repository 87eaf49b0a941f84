import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { hasFastProperties } from '../../test/support/v8-representation.js';
import {
  dropApplyBookkeeping,
  LAST_APPLIED_ANNOTATION,
  LIST_PAGE_SIZE,
  listInPages,
  type ListPage,
} from './informer.js';

describe('dropApplyBookkeeping', () => {
  it('drops managedFields and kubectl’s last-applied configuration, and keeps every other annotation', () => {
    const obj: KubernetesObject = {
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'CustomDomain',
      metadata: {
        name: 'www',
        namespace: 'shop',
        annotations: {
          [LAST_APPLIED_ANNOTATION]: '{"apiVersion":"portico.dev/v1alpha1","kind":"CustomDomain"}',
          'portico.dev/verify': '2026-11-25T07:00:00Z',
        },
        managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
      },
    };
    dropApplyBookkeeping(obj);
    expect(obj.metadata).toEqual({
      name: 'www',
      namespace: 'shop',
      annotations: { 'portico.dev/verify': '2026-11-25T07:00:00Z' },
    });
  });

  it('leaves the trimmed metadata and annotations as fast-mode objects (a `delete` would make hash tables of them)', () => {
    const obj = JSON.parse(
      JSON.stringify({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        metadata: {
          name: 'www',
          namespace: 'shop',
          uid: 'u',
          resourceVersion: '7',
          labels: { 'portico.dev/customdomain': 'www' },
          annotations: { [LAST_APPLIED_ANNOTATION]: '{}', 'portico.dev/applied-digest': 'd' },
          managedFields: [{ manager: 'portico', operation: 'Apply' }],
        },
      }),
    ) as KubernetesObject;
    const deleted = structuredClone(obj);
    delete deleted.metadata?.managedFields;
    expect(hasFastProperties(deleted.metadata)).toBe(false); // what `delete` does, for contrast
    dropApplyBookkeeping(obj);
    expect(obj.metadata?.managedFields).toBeUndefined();
    expect(hasFastProperties(obj.metadata)).toBe(true);
    expect(hasFastProperties(obj.metadata?.annotations)).toBe(true);
  });

  it('leaves an object without bookkeeping as it is', () => {
    const obj: KubernetesObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'x' } };
    dropApplyBookkeeping(obj);
    expect(obj).toEqual({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'x' } });
    const bare: KubernetesObject = { apiVersion: 'v1', kind: 'Secret' };
    dropApplyBookkeeping(bare);
    expect(bare).toEqual({ apiVersion: 'v1', kind: 'Secret' });
  });
});

describe('listInPages', () => {
  type Obj = KubernetesObject & { data?: string };
  const obj = (name: string, resourceVersion: string): Obj => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'shop', resourceVersion },
    data: 'x'.repeat(10),
  });

  it('reads page after page until no continue token, trimming each page before asking for the next', async () => {
    const pages: ListPage[] = [];
    const trimmedWhenAsked: number[] = [];
    let trimmed = 0;
    const all = Array.from({ length: 2 * LIST_PAGE_SIZE + 3 }, (_, i) => obj(`s${String(i)}`, String(i + 1)));
    const result = await listInPages<Obj>(
      (page) => {
        pages.push(page);
        trimmedWhenAsked.push(trimmed);
        const from = page.continue === undefined ? 0 : Number(page.continue);
        const to = Math.min(from + page.limit, all.length);
        return Promise.resolve({
          apiVersion: 'v1',
          kind: 'SecretList',
          metadata: { resourceVersion: '9000', ...(to < all.length ? { _continue: String(to) } : {}) },
          items: all.slice(from, to),
        });
      },
      (o) => {
        delete o.data;
        trimmed += 1;
      },
      () => undefined,
    );
    expect(pages).toEqual([
      { limit: LIST_PAGE_SIZE },
      { limit: LIST_PAGE_SIZE, continue: String(LIST_PAGE_SIZE) },
      { limit: LIST_PAGE_SIZE, continue: String(2 * LIST_PAGE_SIZE) },
    ]);
    expect(trimmedWhenAsked).toEqual([0, LIST_PAGE_SIZE, 2 * LIST_PAGE_SIZE]);
    expect(result.items).toHaveLength(all.length);
    expect(result.items.every((o) => o.data === undefined)).toBe(true);
    expect(result.metadata?.resourceVersion).toBe('9000');
    expect(result.metadata?._continue).toBeUndefined();
  });

  it('hands back the cached copy of an object at the same resourceVersion, without trimming it again', async () => {
    const held = obj('same', '5');
    delete held.data;
    const trimmed: string[] = [];
    const result = await listInPages<Obj>(
      () =>
        Promise.resolve({
          apiVersion: 'v1',
          kind: 'SecretList',
          metadata: { resourceVersion: '10' },
          items: [obj('same', '5'), obj('changed', '7'), obj('new', '8')],
        }),
      (o) => trimmed.push(o.metadata?.name ?? ''),
      (name) => (name === 'same' ? held : name === 'changed' ? obj('changed', '6') : undefined),
    );
    expect(result.items[0]).toBe(held);
    expect(trimmed).toEqual(['changed', 'new']);
  });

  it('rejects with the lister’s error (e.g. an expired continue token)', async () => {
    let calls = 0;
    const gone = Object.assign(new Error('continue token expired'), { code: 410 });
    await expect(
      listInPages<Obj>(
        () => {
          calls += 1;
          return calls === 1
            ? Promise.resolve({
                apiVersion: 'v1',
                kind: 'SecretList',
                metadata: { _continue: 'a' },
                items: [],
              })
            : Promise.reject(gone);
        },
        () => undefined,
        () => undefined,
      ),
    ).rejects.toBe(gone);
  });
});
