import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import {
  attachedCondition,
  attachmentFieldManager,
  attachmentManagersOn,
  contourDescriptors,
  DEFAULT_ATTACHMENT_HEADERS,
  extensionServiceApply,
  httpProxyApply,
  httpProxyRelease,
  targetsOf,
  targetVerdict,
  trimProxy,
  type HTTPProxy,
} from './attachment.js';

const policy: RateLimitPolicy = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { name: 'public-api', namespace: 'platform-api', generation: 2 },
  spec: {
    targetRefs: [
      { group: 'projectcontour.io', kind: 'HTTPProxy', name: 'api' },
      { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
      { group: 'projectcontour.io', kind: 'HTTPProxy', name: 'api' },
    ],
    plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
    defaultPlan: 'free',
  },
};
const proxyRef = { group: 'projectcontour.io', kind: 'HTTPProxy', name: 'api' };

function proxy(over: Partial<HTTPProxy> = {}): HTTPProxy {
  return {
    metadata: { name: 'api', namespace: 'platform-api', generation: 3, resourceVersion: '42' },
    spec: { virtualhost: { fqdn: 'api.example.com' } },
    status: {
      currentStatus: 'valid',
      description: 'Valid HTTPProxy',
      conditions: [{ type: 'Valid', status: 'True', observedGeneration: 3 }],
    },
    ...over,
  };
}

describe('contourDescriptors', () => {
  it('names the policy first, then key_id and plan from the headers; a second descriptor for a missing plan header, a third by client address for a missing key id header', () => {
    expect(contourDescriptors(policy, DEFAULT_ATTACHMENT_HEADERS)).toEqual([
      {
        entries: [
          { genericKey: { key: 'portico.dev/policy', value: 'platform-api/public-api' } },
          { requestHeader: { headerName: 'x-api-key-id', descriptorKey: 'key_id' } },
          { requestHeader: { headerName: 'x-api-plan', descriptorKey: 'plan' } },
        ],
      },
      {
        entries: [
          { genericKey: { key: 'portico.dev/policy', value: 'platform-api/public-api' } },
          { requestHeader: { headerName: 'x-api-key-id', descriptorKey: 'key_id' } },
          {
            requestHeaderValueMatch: {
              headers: [{ name: 'x-api-plan', notpresent: true }],
              expectMatch: true,
              value: 'no-plan-header',
            },
          },
        ],
      },
      {
        entries: [
          { genericKey: { key: 'portico.dev/policy', value: 'platform-api/public-api' } },
          {
            requestHeaderValueMatch: {
              headers: [{ name: 'x-api-key-id', notpresent: true }],
              expectMatch: true,
              value: 'no-key-id-header',
            },
          },
          { remoteAddress: {} },
        ],
      },
    ]);
  });

  it('uses the configured headers', () => {
    const text = JSON.stringify(contourDescriptors(policy, { keyId: 'x-key', plan: 'x-tier' }));
    expect(text).toContain('"headerName":"x-key"');
    expect(text).toContain('"name":"x-tier"');
    expect(text).not.toContain('x-api-');
  });
});

describe('the apply configurations', () => {
  it('hold only the descriptors, with the resourceVersion judged as precondition', () => {
    expect(
      httpProxyApply(policy, { name: 'api', resourceVersion: '42' }, DEFAULT_ATTACHMENT_HEADERS),
    ).toEqual({
      apiVersion: 'projectcontour.io/v1',
      kind: 'HTTPProxy',
      metadata: { name: 'api', namespace: 'platform-api', resourceVersion: '42' },
      spec: {
        virtualhost: {
          rateLimitPolicy: {
            global: { descriptors: contourDescriptors(policy, DEFAULT_ATTACHMENT_HEADERS) },
          },
        },
      },
    });
    expect(httpProxyRelease({ namespace: 'platform-api', name: 'api', resourceVersion: '43' })).toEqual({
      apiVersion: 'projectcontour.io/v1',
      kind: 'HTTPProxy',
      metadata: { name: 'api', namespace: 'platform-api', resourceVersion: '43' },
    });
  });

  it('point the ExtensionService at the Service over h2c with the timeout', () => {
    expect(
      extensionServiceApply({
        namespace: 'portico-system',
        name: 'portico-ratelimit',
        serviceName: 'portico-ratelimit',
        servicePort: 8081,
        timeoutMs: 750,
      }),
    ).toEqual({
      apiVersion: 'projectcontour.io/v1alpha1',
      kind: 'ExtensionService',
      metadata: { name: 'portico-ratelimit', namespace: 'portico-system' },
      spec: {
        protocol: 'h2c',
        protocolVersion: 'v3',
        services: [{ name: 'portico-ratelimit', port: 8081 }],
        timeoutPolicy: { response: '750ms' },
      },
    });
  });
});

describe('field managers', () => {
  it('are one per policy, within the 128 characters the API server allows', () => {
    expect(attachmentFieldManager('public-api')).toBe('portico-ratelimit/public-api');
    const long = 'a'.repeat(253);
    const manager = attachmentFieldManager(long);
    expect(manager.length).toBeLessThanOrEqual(128);
    expect(manager).toMatch(/^portico-ratelimit\/a{92}-[0-9a-f]{16}$/);
    expect(attachmentFieldManager(`${'a'.repeat(252)}b`)).not.toBe(manager);
  });

  it("are read from an HTTPProxy's managedFields (apply entries only)", () => {
    const p = proxy();
    p.metadata.managedFields = [
      { manager: 'kubectl', operation: 'Apply' },
      { manager: 'portico-ratelimit/a', operation: 'Apply' },
      { manager: 'portico-ratelimit/b', operation: 'Update' },
      { manager: 'contour', operation: 'Update' },
    ];
    expect(attachmentManagersOn(p)).toEqual(['portico-ratelimit/a']);
  });
});

describe('targetsOf', () => {
  it('keeps each target once, in order', () => {
    expect(targetsOf(policy).map((r) => `${r.kind}/${r.name}`)).toEqual(['HTTPProxy/api', 'HTTPRoute/web']);
  });
});

describe('the Attached verdict', () => {
  it('is wired once Contour reports the current generation valid', () => {
    expect(targetVerdict(proxyRef, { kind: 'applied', proxy: proxy() }, 'platform-api')).toEqual({
      ref: proxyRef,
      wired: true,
      reason: 'Attached',
      message:
        'projectcontour.io/HTTPProxy api (api.example.com): descriptors applied and accepted by Contour',
    });
  });

  it('waits for Contour when its status is about an older generation', () => {
    const p = proxy({ status: { conditions: [{ type: 'Valid', status: 'True', observedGeneration: 2 }] } });
    const v = targetVerdict(proxyRef, { kind: 'applied', proxy: p }, 'platform-api');
    expect(v).toMatchObject({ wired: false, reason: 'AwaitingContour' });
    expect(v.message).toContain('generation 3');
  });

  it("carries Contour's words when it refuses the HTTPProxy", () => {
    const p = proxy({
      status: {
        currentStatus: 'invalid',
        description: 'At least one error present, see Errors for details',
        conditions: [
          {
            type: 'Valid',
            status: 'False',
            observedGeneration: 3,
            errors: [
              {
                type: 'ServiceError',
                reason: 'ServiceUnresolvedReference',
                message: 'Service "x" not found',
              },
            ],
          },
        ],
      },
    });
    const v = targetVerdict(proxyRef, { kind: 'applied', proxy: p }, 'platform-api');
    expect(v).toMatchObject({ wired: false, reason: 'RefusedByContour' });
    expect(v.message).toBe(
      'projectcontour.io/HTTPProxy api: Contour reports it invalid: At least one error present, see Errors for details; Service "x" not found',
    );
  });

  it('names the target and the cause for each way it is not wired', () => {
    const cases = [
      [
        { kind: 'notFound' },
        'TargetNotFound',
        'projectcontour.io/HTTPProxy api: not found in namespace platform-api',
      ],
      [{ kind: 'notRoot' }, 'NotRootProxy', 'has no spec.virtualhost'],
      [
        { kind: 'unsupported' },
        'UnsupportedTarget',
        'only projectcontour.io/HTTPProxy, gateway.networking.k8s.io/HTTPRoute and gateway.networking.k8s.io/Gateway (the last two with Envoy Gateway) targets are supported',
      ],
      [{ kind: 'conflict', message: 'conflict with "kubectl"' }, 'FieldConflict', 'conflict with "kubectl"'],
      [{ kind: 'applyFailed', message: 'forbidden' }, 'ApplyFailed', 'forbidden'],
      [{ kind: 'disabled' }, 'ContourAttachmentDisabled', '--contour-attachment=false'],
    ] as const;
    for (const [outcome, reason, text] of cases) {
      const v = targetVerdict(proxyRef, outcome, 'platform-api');
      expect(v.wired).toBe(false);
      expect(v.reason).toBe(reason);
      expect(v.message).toContain(text);
    }
  });

  it('is True only when every target is wired, else names each one that is not', () => {
    expect(attachedCondition([])).toBeUndefined();
    const ok = targetVerdict(proxyRef, { kind: 'applied', proxy: proxy() }, 'ns');
    expect(attachedCondition([ok])).toMatchObject({ type: 'Attached', status: 'True', reason: 'Attached' });
    const route = { group: 'gateway.networking.k8s.io', kind: 'GRPCRoute', name: 'web' };
    const missing = targetVerdict({ ...proxyRef, name: 'gone' }, { kind: 'notFound' }, 'ns');
    const unsupported = targetVerdict(route, { kind: 'unsupported' }, 'ns');
    expect(attachedCondition([ok, missing, unsupported])).toEqual({
      type: 'Attached',
      status: 'False',
      reason: 'TargetNotFound',
      message:
        'projectcontour.io/HTTPProxy gone: not found in namespace ns; gateway.networking.k8s.io/GRPCRoute web: ' +
        'only projectcontour.io/HTTPProxy, gateway.networking.k8s.io/HTTPRoute and gateway.networking.k8s.io/Gateway ' +
        '(the last two with Envoy Gateway) targets are supported (1 of 3 targets wired)',
    });
  });
});

describe('trimProxy', () => {
  it('keeps what attachment reads and drops routes, TLS and other conditions', () => {
    const p = proxy({
      spec: {
        virtualhost: { fqdn: 'api.example.com', rateLimitPolicy: { global: { descriptors: [] } } },
        routes: [{ services: [{ name: 'web', port: 80 }] }],
      },
    });
    p.status?.conditions?.push({ type: 'Other', status: 'True' });
    trimProxy(p);
    expect(p.spec).toEqual({
      virtualhost: { fqdn: 'api.example.com', rateLimitPolicy: { global: { descriptors: [] } } },
    });
    expect(p.status).toEqual({
      currentStatus: 'valid',
      description: 'Valid HTTPProxy',
      conditions: [{ type: 'Valid', status: 'True', observedGeneration: 3 }],
    });
    const child = proxy({ spec: { routes: [] } });
    trimProxy(child);
    expect(child.spec).toEqual({});
    expect(targetVerdict(proxyRef, { kind: 'applied', proxy: p }, 'ns').wired).toBe(true);
  });
});
