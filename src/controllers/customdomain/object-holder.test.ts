import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../api/customdomain.js';
import type { ObjectHeader } from '../../routing/plan.js';
import { foreignKind, notOurs, otherOwner } from './object-holder.js';

const domain = {
  metadata: { name: 'www', namespace: 'shop', uid: 'uid-www' },
} as CustomDomain;
const at = (apiVersion: string, kind: string): ObjectHeader => ({
  apiVersion,
  kind,
  metadata: { name: 'portico-www', namespace: 'shop' },
});
const proxy = at('projectcontour.io/v1', 'HTTPProxy');
const ingress = at('networking.k8s.io/v1', 'Ingress');
const labelled = (labels?: Record<string, string>, ownerUid?: string): KubernetesObject => ({
  metadata: {
    name: 'portico-www',
    namespace: 'shop',
    ...(labels ? { labels } : {}),
    ...(ownerUid
      ? {
          ownerReferences: [
            {
              apiVersion: 'portico.dev/v1alpha1',
              kind: 'CustomDomain',
              name: 'www',
              uid: ownerUid,
              controller: true,
            },
          ],
        }
      : {}),
  },
});
const ours = { 'app.kubernetes.io/managed-by': 'portico', 'portico.dev/customdomain': 'www' };

describe('whose an object at Portico’s name is', () => {
  it("names another CustomDomain by its owner label, and nothing for this domain's or an unlabelled object", () => {
    expect(otherOwner(labelled({ ...ours, 'portico.dev/customdomain': 'apex' }), domain)).toBe('apex');
    expect(otherOwner(labelled(ours), domain)).toBeUndefined();
    expect(otherOwner(labelled(), domain)).toBeUndefined();
    expect(otherOwner(undefined, domain)).toBeUndefined();
  });

  it('leaves alone an HTTPProxy Portico did not write, but replaces an unlabelled Ingress as before', () => {
    expect(foreignKind(proxy)).toBe(true);
    expect(foreignKind(ingress)).toBe(false);
    expect(notOurs(proxy, labelled(), domain)).toBe(true);
    expect(notOurs(proxy, labelled({ 'app.kubernetes.io/managed-by': 'helm' }), domain)).toBe(true);
    expect(notOurs(proxy, labelled(ours, 'uid-www'), domain)).toBe(false);
    expect(notOurs(ingress, labelled(), domain)).toBe(false);
  });

  it('leaves alone an HTTPProxy labelled as Portico’s without its controller reference to this domain', () => {
    // Labels are anyone's to write: only the ownerReference to this domain's uid makes it ours.
    expect(notOurs(proxy, labelled(ours), domain)).toBe(true);
    expect(notOurs(proxy, labelled(ours, 'uid-other'), domain)).toBe(true);
    expect(notOurs(proxy, labelled(undefined, 'uid-www'), domain)).toBe(false);
  });

  it("leaves alone another domain's object of any kind", () => {
    const theirs = labelled({ ...ours, 'portico.dev/customdomain': 'apex' });
    expect(notOurs(proxy, theirs, domain)).toBe(true);
    expect(notOurs(ingress, theirs, domain)).toBe(true);
  });
});
