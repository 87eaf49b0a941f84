import { describe, expect, it } from 'vitest';
import { statusChanges } from './status-write.js';

describe('statusChanges', () => {
  it('lists the changed conditions, then each other field whose value differs', () => {
    const at = '2026-01-01T00:00:00.000Z';
    const before = {
      phase: 'AwaitingDNS' as const,
      conditions: [
        {
          type: 'DNSVerified',
          status: 'False' as const,
          reason: 'Pending',
          message: '',
          lastTransitionTime: at,
        },
      ],
    };
    const after = {
      phase: 'Verified' as const,
      verifiedAt: at,
      conditions: [
        {
          type: 'DNSVerified',
          status: 'True' as const,
          reason: 'Verified',
          message: '',
          lastTransitionTime: at,
        },
      ],
    };
    const changes = statusChanges(before, after);
    expect(changes.slice(-2)).toEqual(['phase', 'verifiedAt']);
    expect(changes.length).toBe(3);
    expect(statusChanges(after, after)).toEqual([]);
  });
});
