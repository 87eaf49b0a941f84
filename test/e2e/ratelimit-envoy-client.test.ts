/**
 * An independent client gets the same answers (docs/ratelimits.md, "Tests"): envoyproxy/ratelimit's
 * `src/client_cmd` (Go, generated from Envoy's protos by go-control-plane; built from the Go module
 * proxy at the commit pinned in scripts/install-tools.sh) calls the sandbox's rate-limit server for
 * one key while Portico's own client calls it for another key of the same plan, in lockstep: after
 * every pair of calls the two answers must agree on the code, the limit, the remaining count and
 * the headers. client_cmd's text answer is read by `parseClientCmd` (ratelimit-helpers.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from './support/cluster.js';
import {
  check,
  createNamespace,
  createPolicy,
  envoyClientCheck,
  freshMinute,
  rateLimitClient,
  waitForPolicyCondition,
} from './ratelimit-helpers.js';

const ns = unique('rl-envoy');
const name = 'public-api';
const domain = `${ns}/${name}`;

beforeAll(async () => {
  await createNamespace(ns);
  await createPolicy(ns, name, {
    plans: [
      { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
      { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
    ],
    defaultPlan: 'free',
  });
  await waitForPolicyCondition(ns, name, 'Enforced', 'True', 'Loaded');
});

afterAll(() => {
  rateLimitClient().close();
});

describe("envoyproxy/ratelimit's client_cmd", () => {
  it("gets the same answers as Portico's client, call for call, through the 61st", async () => {
    await freshMinute(30);
    for (let i = 1; i <= 61; i++) {
      const theirs = await envoyClientCheck(domain, 'key_id=envoy-key,plan=free');
      const ours = await check(domain, { key_id: 'portico-key', plan: 'free' });
      expect(theirs.code).toBe(ours.code);
      expect(theirs.code).toBe(i <= 60 ? 'OK' : 'OVER_LIMIT');
      expect(theirs.limit).toBe(60);
      expect(theirs.remaining).toBe(ours.response.statuses[0]?.limit_remaining ?? 0);
      expect(theirs.headers['X-RateLimit-Limit']).toBe(ours.headers['X-RateLimit-Limit']);
      expect(theirs.headers['X-RateLimit-Remaining']).toBe(ours.headers['X-RateLimit-Remaining']);
      expect(theirs.headers['X-RateLimit-Reset']).toBe(ours.headers['X-RateLimit-Reset']);
      if (i === 61) {
        expect(
          Math.abs(Number(theirs.headers['Retry-After']) - Number(ours.headers['Retry-After'])),
        ).toBeLessThanOrEqual(1);
      }
    }
  });

  it('sees the plan and default plan rules the same way', async () => {
    const pro = await envoyClientCheck(domain, 'key_id=envoy-pro,plan=pro');
    expect(pro).toMatchObject({ code: 'OK', limit: 300, remaining: 299 });
    const unknown = await envoyClientCheck(domain, 'key_id=envoy-unknown,plan=gold');
    expect(unknown).toMatchObject({ code: 'OK', limit: 60, remaining: 59 });
  });
});
