import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { compilePolicy } from './compile.js';
import { desiredStatus } from './status.js';

const NOW = new Date('2026-11-27T12:00:00.000Z');
const LATER = new Date('2026-11-27T12:05:00.000Z');

const policy: RateLimitPolicy = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { name: 'api', namespace: 'shop', generation: 4, uid: 'u1' },
  spec: {
    targetRefs: [{ group: 'projectcontour.io', kind: 'HTTPProxy', name: 'api' }],
    plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
    defaultPlan: 'free',
  },
};

function status(p: RateLimitPolicy, attached: Parameters<typeof desiredStatus>[0]['attached'], now = NOW) {
  return desiredStatus({
    policy: p,
    compiled: compilePolicy(p),
    reports: [],
    now,
    statusConfigMap: 'portico-system/portico-ratelimit-status',
    attached,
  });
}

describe('desiredStatus, Attached', () => {
  it('sets Attached beside Accepted and Enforced, for the current generation', () => {
    const s = status(policy, { type: 'Attached', status: 'False', reason: 'TargetNotFound', message: 'm' });
    expect(s.conditions?.map((c) => c.type)).toEqual(['Accepted', 'Enforced', 'Attached']);
    expect(s.conditions?.find((c) => c.type === 'Attached')).toEqual({
      type: 'Attached',
      status: 'False',
      reason: 'TargetNotFound',
      message: 'm',
      observedGeneration: 4,
      lastTransitionTime: NOW.toISOString(),
    });
  });

  it('keeps the transition time while the status holds, and drops the condition once there are no targets', () => {
    const first = status(policy, {
      type: 'Attached',
      status: 'False',
      reason: 'AwaitingContour',
      message: 'a',
    });
    const withStatus: RateLimitPolicy = { ...policy, status: first };
    const second = status(
      withStatus,
      { type: 'Attached', status: 'False', reason: 'RefusedByContour', message: 'b' },
      LATER,
    );
    expect(second.conditions?.find((c) => c.type === 'Attached')?.lastTransitionTime).toBe(NOW.toISOString());
    const none = status({ ...withStatus, spec: { ...policy.spec, targetRefs: [] } }, undefined, LATER);
    expect(none.conditions?.map((c) => c.type)).toEqual(['Accepted', 'Enforced']);
  });
});
