import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { apiFailure } from './attacher.js';

/** The Status kube-apiserver v1.37 answered an apply that conflicted (seen in the e2e stack). */
const CONFLICT_BODY =
  '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: ' +
  'conflict with \\"platform-team\\": .spec.virtualhost.rateLimitPolicy.global.descriptors","reason":"Conflict",' +
  '"details":{"causes":[{"reason":"FieldManagerConflict","message":"conflict with \\"platform-team\\"",' +
  '"field":".spec.virtualhost.rateLimitPolicy.global.descriptors"}]},"code":409}';

describe('apiFailure', () => {
  it("tells a field manager conflict, with the API server's message", () => {
    const failure = apiFailure(new ApiException(409, 'Conflict', CONFLICT_BODY, {}));
    expect(failure).toEqual({
      fieldConflict: true,
      message:
        'Apply failed with 1 conflict: conflict with "platform-team": .spec.virtualhost.rateLimitPolicy.global.descriptors',
    });
  });

  it('tells a stale resourceVersion from a field conflict', () => {
    const body = JSON.stringify({
      kind: 'Status',
      message:
        'Operation cannot be fulfilled on httpproxies.projectcontour.io "api": the object has been modified',
      reason: 'Conflict',
      code: 409,
    });
    expect(apiFailure(new ApiException(409, 'Conflict', body, {})).fieldConflict).toBe(false);
    expect(apiFailure(new Error('socket hang up'))).toEqual({
      fieldConflict: false,
      message: 'socket hang up',
    });
  });
});
