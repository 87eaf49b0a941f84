import { describe, expect, it } from 'vitest';

import type { Condition } from '../api/customdomain.js';
import { conditionChanges } from './conditions.js';

function condition(type: string, status: Condition['status'], reason: string, message: string): Condition {
  return { type, status, reason, message, lastTransitionTime: '2026-11-27T00:00:00Z' };
}

const verified = condition('DNSVerified', 'True', 'Verified', 'www.example.com is a CNAME to the platform.');
const queued = (message: string): Condition => condition('CertificateReady', 'False', 'OrderQueued', message);

describe('conditionChanges', () => {
  it('names new conditions and changed reasons, and marks a change of message alone', () => {
    const before = [verified, queued('Turn expected at 10:00:05Z.')];
    expect(conditionChanges(before, [verified, queued('Turn expected at 10:02:00Z.')])).toEqual([
      'CertificateReady=False/OrderQueued (message)',
    ]);
    const issuing = condition('CertificateReady', 'False', 'Issuing', 'The order is placed.');
    const ready = condition('Ready', 'False', 'Issuing', 'not yet');
    expect(conditionChanges(before, [verified, issuing, ready])).toEqual([
      'CertificateReady=False/Issuing',
      'Ready=False/Issuing',
    ]);
  });

  it('names removed conditions, and nothing when only other fields differ', () => {
    expect(conditionChanges([verified, queued('x')], [verified])).toEqual(['-CertificateReady']);
    const later = { ...verified, lastTransitionTime: '2026-11-28T00:00:00Z', observedGeneration: 2 };
    expect(conditionChanges([verified], [later])).toEqual([]);
    expect(conditionChanges(undefined, [verified])).toEqual(['DNSVerified=True/Verified']);
  });
});
