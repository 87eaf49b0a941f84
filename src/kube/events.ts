/**
 * Records Kubernetes Events (core/v1) on an object, so `kubectl describe` tells its story.
 * Never throws: a failed Event is logged and dropped, it must not fail a reconcile.
 */
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Condition } from '../api/customdomain.js';
import { changedConditions } from './conditions.js';

export type EventType = 'Normal' | 'Warning';

/** The object an Event is about: any namespaced object (a CustomDomain, a RateLimitPolicy). */
export interface EventSubject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid?: string; resourceVersion?: string };
}

export class EventRecorder {
  readonly #core: CoreV1Api;
  readonly #component: string;
  readonly #log: Logger;

  constructor(core: CoreV1Api, component: string, log: Logger) {
    this.#core = core;
    this.#component = component;
    this.#log = log;
  }

  /**
   * Records one Event on `obj`.
   * @param reason UpperCamelCase, e.g. `DNSVerified`
   * @param message a sentence for a person
   */
  async record(obj: EventSubject, type: EventType, reason: string, message: string): Promise<void> {
    const now = new Date();
    const namespace = obj.metadata.namespace;
    try {
      await this.#core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { generateName: `${obj.metadata.name}.`, namespace },
          involvedObject: {
            apiVersion: obj.apiVersion,
            kind: obj.kind,
            name: obj.metadata.name,
            namespace,
            ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}),
            ...(obj.metadata.resourceVersion ? { resourceVersion: obj.metadata.resourceVersion } : {}),
          },
          type,
          reason,
          message: message.slice(0, 1024),
          source: { component: this.#component },
          reportingComponent: this.#component,
          reportingInstance: process.env.HOSTNAME ?? this.#component,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    } catch (err) {
      this.#log.warn({ err, reason, namespace, name: obj.metadata.name }, 'could not record event');
    }
  }

  /**
   * Records one Event per condition of `after` that is new or changed status or reason since
   * `before` (`changedConditions`): reason = the condition's reason, message `<type>: <message>`,
   * Warning when the reason is in `warningReasons` (reasons that ask a person to act), else Normal.
   */
  async recordTransitions(
    obj: EventSubject,
    before: readonly Condition[] | undefined,
    after: readonly Condition[],
    warningReasons: ReadonlySet<string>,
  ): Promise<void> {
    for (const c of changedConditions(before, after)) {
      await this.record(
        obj,
        warningReasons.has(c.reason) ? 'Warning' : 'Normal',
        c.reason,
        `${c.type}: ${c.message}`,
      );
    }
  }
}
