import { describe, expect, it } from 'vitest';

import type { Condition } from '../api/customdomain.js';
import { transitionEvents } from './events.js';

const WARNINGS = new Set(['ServicePortNotFound', 'CAAForbidsIssuance']);

function condition(type: string, status: Condition['status'], reason: string, message: string): Condition {
  return { type, status, reason, message, lastTransitionTime: '2026-11-26T00:00:00Z' };
}

const dnsVerified = condition(
  'DNSVerified',
  'True',
  'Verified',
  'www.example.com is a CNAME to the platform.',
);
const issuing = condition('CertificateReady', 'False', 'Issuing', 'The order is placed.');
const issued = condition('CertificateReady', 'True', 'Issued', 'Issued by Pebble.');
const portMissing = condition(
  'Routed',
  'False',
  'ServicePortNotFound',
  'Service web has no port named "https".',
);

describe('transitionEvents', () => {
  it('names each Warning transition on its own, and folds the Normal ones into one Event, last', () => {
    const after = [dnsVerified, issuing, portMissing, condition('Ready', 'False', 'Issuing', 'not yet')];
    expect(transitionEvents(undefined, after, WARNINGS)).toEqual([
      {
        type: 'Warning',
        reason: 'ServicePortNotFound',
        message: 'Routed: Service web has no port named "https".',
      },
      {
        type: 'Normal',
        reason: 'Issuing',
        message:
          'DNSVerified Verified: www.example.com is a CNAME to the platform. CertificateReady Issuing: The order is placed. Ready Issuing: not yet',
      },
    ]);
  });

  it('records nothing when no status or reason changed (a new message alone is no transition)', () => {
    const before = [dnsVerified, portMissing];
    const after = [dnsVerified, { ...portMissing, message: 'Service web has no port named "https" (80).' }];
    expect(transitionEvents(before, after, WARNINGS)).toEqual([]);
  });

  describe('with a summary condition (Ready)', () => {
    const readyPortMissing = condition(
      'Ready',
      'False',
      'ServicePortNotFound',
      `Routed: ${portMissing.message}`,
    );

    it('gives a cause one Warning when the summary turns in the same write', () => {
      const after = [dnsVerified, issued, portMissing, readyPortMissing];
      const events = transitionEvents(undefined, after, WARNINGS, { summaryType: 'Ready' });
      expect(events.filter((e) => e.type === 'Warning')).toEqual([
        {
          type: 'Warning',
          reason: 'ServicePortNotFound',
          message: 'Routed: Service web has no port named "https".',
        },
      ]);
      // Without the option, the summary repeats the cause.
      expect(transitionEvents(undefined, after, WARNINGS).filter((e) => e.type === 'Warning')).toHaveLength(
        2,
      );
    });

    it('records no Warning when the summary takes up a cause named in an earlier write', () => {
      // The certificate is issued after the port was found missing: Ready's reason turns from
      // Issuing to ServicePortNotFound, a cause Routed's Event already named.
      const before = [dnsVerified, issuing, portMissing, condition('Ready', 'False', 'Issuing', 'not yet')];
      const after = [dnsVerified, issued, portMissing, readyPortMissing];
      expect(transitionEvents(before, after, WARNINGS, { summaryType: 'Ready' })).toEqual([
        {
          type: 'Normal',
          reason: 'Issued',
          message: 'CertificateReady Issued: Issued by Pebble.',
        },
      ]);
    });

    it('still records a Warning of the summary whose reason no other condition has', () => {
      const after = [
        dnsVerified,
        issued,
        condition('Ready', 'False', 'CAAForbidsIssuance', 'the serving check'),
      ];
      expect(transitionEvents(undefined, after, WARNINGS, { summaryType: 'Ready' })).toContainEqual({
        type: 'Warning',
        reason: 'CAAForbidsIssuance',
        message: 'Ready: the serving check',
      });
    });

    it('counts only causes that still block: a True condition of the same reason is no cause', () => {
      const after = [condition('Routed', 'True', 'ServicePortNotFound', 'odd but True'), readyPortMissing];
      expect(transitionEvents(undefined, after, WARNINGS, { summaryType: 'Ready' })).toContainEqual({
        type: 'Warning',
        reason: 'ServicePortNotFound',
        message: `Ready: Routed: ${portMissing.message}`,
      });
    });
  });
});
