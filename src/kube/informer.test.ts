import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { dropApplyBookkeeping, LAST_APPLIED_ANNOTATION } from './informer.js';

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

  it('leaves an object without bookkeeping as it is', () => {
    const obj: KubernetesObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'x' } };
    dropApplyBookkeeping(obj);
    expect(obj).toEqual({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'x' } });
    const bare: KubernetesObject = { apiVersion: 'v1', kind: 'Secret' };
    dropApplyBookkeeping(bare);
    expect(bare).toEqual({ apiVersion: 'v1', kind: 'Secret' });
  });
});
