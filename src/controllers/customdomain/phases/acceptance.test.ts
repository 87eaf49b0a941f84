import { describe, expect, it } from 'vitest';
import { releasesClaim } from './acceptance.js';

describe('releasesClaim', () => {
  it('lets the claim go for a plan, reserved or invalid refusal only', () => {
    for (const reason of ['PlanNotEligible', 'ReservedHostname', 'InvalidHostname'])
      expect(releasesClaim(reason)).toBe(true);
    for (const reason of ['NotDeployed', 'HostnameAlreadyClaimed', 'Accepted'])
      expect(releasesClaim(reason)).toBe(false);
  });
});
