import { describe, expect, it } from 'vitest';
import { recordsOrNodata } from './dns.js';

describe('recordsOrNodata', () => {
  it('answers the configured apex addresses as records, or NODATA when there are none', () => {
    expect(recordsOrNodata(['192.0.2.1'])).toEqual({ kind: 'records', values: ['192.0.2.1'] });
    expect(recordsOrNodata([])).toEqual({ kind: 'nodata' });
  });
});
