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
   * Records the condition transitions of one status write as `transitionEvents` lists them, in
   * that order. Never throws (see `record`).
   */
  async recordTransitions(
    obj: EventSubject,
    before: readonly Condition[] | undefined,
    after: readonly Condition[],
    warningReasons: ReadonlySet<string>,
    options: TransitionEventOptions = {},
  ): Promise<void> {
    for (const event of transitionEvents(before, after, warningReasons, options)) {
      await this.record(obj, event.type, event.reason, event.message);
    }
  }
}

/** One Event to record: its type, reason (UpperCamelCase) and message. */
export interface EventInput {
  type: EventType;
  reason: string;
  message: string;
}

export interface TransitionEventOptions {
  /**
   * The type of the condition that sums up the others (a CustomDomain's `Ready`, whose reason when
   * False is that of the first blocking condition). A Warning transition of it whose reason is
   * that of another condition of `after` (neither True) is no Event of its own: that condition's Event
   * named the cause when it turned, in this write or an earlier one.
   */
  summaryType?: string;
}

/**
 * The Events of one status write's condition transitions (`changedConditions(before, after)`: new,
 * or changed status or reason): one Warning Event per transition whose reason is in
 * `warningReasons` (each asks a person to act, so each is named on its own; message
 * `<type>: <message>`), and at most one Normal Event for all the others together, last, whose reason
 * is that of the last of them in `after`'s order (the furthest step, e.g. `Live` over `Issued`) and
 * whose message lists each one as `<type> <reason>: <message>`. A status write thus costs at most
 * one Normal Event, not one per condition (at 10,000 domains, Events were most of the operator's
 * writes), and a cause one Warning, not one more for the summary condition that repeats it
 * (`options.summaryType`). Pure.
 */
export function transitionEvents(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
  warningReasons: ReadonlySet<string>,
  options: TransitionEventOptions = {},
): EventInput[] {
  const changed = changedConditions(before, after);
  const events: EventInput[] = [];
  for (const c of changed) {
    if (!warningReasons.has(c.reason) || repeatsACause(c, after, options.summaryType)) continue;
    events.push({ type: 'Warning', reason: c.reason, message: `${c.type}: ${c.message}` });
  }
  const normal = changed.filter((c) => !warningReasons.has(c.reason));
  const last = normal.at(-1);
  if (last) {
    const message = normal.map((c) => `${c.type} ${c.reason}: ${c.message}`).join(' ');
    events.push({ type: 'Normal', reason: last.reason, message });
  }
  return events;
}

/**
 * True when `c` is the summary condition, not True, for a reason that another condition of `after`,
 * not True either, has.
 */
function repeatsACause(c: Condition, after: readonly Condition[], summaryType: string | undefined): boolean {
  if (summaryType === undefined || c.type !== summaryType || c.status === 'True') return false;
  return after.some((other) => other.type !== c.type && other.status !== 'True' && other.reason === c.reason);
}
