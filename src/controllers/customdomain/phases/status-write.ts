/**
 * The status write of a CustomDomain reconcile: the new status (status.ts buildStatus) replaces the
 * old one only when they differ; the condition transitions become Events (Warning per the reasons'
 * catalogue, src/api/reasons.ts), and each newly seen foreign route one Warning Event.
 */
import type { Logger } from 'pino';
import {
  CUSTOM_DOMAIN_PLURAL,
  FIELD_MANAGER,
  GROUP,
  VERSION,
  type CustomDomain,
  type CustomDomainStatus,
} from '../../../api/customdomain.js';
import { WARNING_REASONS } from '../../../api/reasons.js';
import { conditionChanges, findCondition } from '../../../kube/conditions.js';
import { contains } from '../../../kube/applied-state.js';
import { CONFLICTED_CONDITION, FOREIGN_ROUTE_REASON } from '../status.js';
import { namedRoutes as namedIn, newRoutes } from '../../../routing/foreign-routes.js';
import { transitionEvents } from '../../../kube/events.js';
import type { CustomDomainReconcilerDeps } from './deps.js';

/** Writes a CustomDomain's status once per reconcile, and only when it changed, with its Events. */
export class StatusWriter {
  readonly #d: CustomDomainReconcilerDeps;

  constructor(deps: CustomDomainReconcilerDeps) {
    this.#d = deps;
  }

  /**
   * The Events of one status write: the condition transitions (`transitionEvents`, Ready as the
   * summary), but for `ForeignRoute`, which instead gets one Warning Event per foreign route the
   * previous Conflicted message did not name (a second route names the hostname: one more Event; the
   * same routes at the next reconcile: none).
   */
  async #recordEvents(
    domain: CustomDomain,
    after: NonNullable<CustomDomainStatus['conditions']>,
  ): Promise<void> {
    const before = domain.status?.conditions;
    const events = transitionEvents(before, after, WARNING_REASONS, { summaryType: 'Ready' });
    for (const event of events)
      if (event.reason !== FOREIGN_ROUTE_REASON)
        await this.#d.events.record(domain, event.type, event.reason, event.message);
    const now = findCondition(after, CONFLICTED_CONDITION);
    if (now?.status !== 'True') return;
    const previous = findCondition(before, CONFLICTED_CONDITION);
    const seen = previous?.status === 'True' ? previous.message : undefined;
    for (const route of newRoutes(seen, [...namedIn(now.message)]))
      await this.#d.events.record(
        domain,
        'Warning',
        FOREIGN_ROUTE_REASON,
        `${route} names ${domain.spec.hostname}, which this CustomDomain holds; the ingress controller may send part or all of its traffic there. Delete it or remove the hostname from it.`,
      );
  }

  async write(domain: CustomDomain, status: CustomDomainStatus, log: Logger): Promise<void> {
    // Equal but for fields left undefined (absent from what the API server returns): nothing to
    // write. Compared in place (the status holds only JSON values): the JSON copy below, which
    // drops those fields, and isDeepStrictEqual's property descriptors were the largest part of
    // what a resync allocated at 10,000 domains (docs/performance.md, eleventh round).
    const current = domain.status ?? {};
    if (contains(current, status) && contains(status, current)) return;
    const next = JSON.parse(JSON.stringify(status)) as CustomDomainStatus;
    await this.#d.customObjects.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: domain.metadata.namespace,
      plural: CUSTOM_DOMAIN_PLURAL,
      name: domain.metadata.name,
      body: { ...domain, status: next },
      fieldManager: FIELD_MANAGER,
    });
    await this.#recordEvents(domain, next.conditions ?? []);
    log.info({ phase: next.phase, changed: statusChanges(current, next) }, 'status updated');
  }
}

/**
 * What a status write changed, for its log line (the scale benchmark counts writes by it): the
 * conditions' changes (`conditionChanges`), then the name of each other top-level status field
 * whose value differs. Pure.
 */
export function statusChanges(before: CustomDomainStatus, after: CustomDomainStatus): string[] {
  const changes = conditionChanges(before.conditions, after.conditions ?? []);
  const fields = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const field of fields) {
    if (field === 'conditions') continue;
    const a = (before as Record<string, unknown>)[field];
    const b = (after as Record<string, unknown>)[field];
    if (!(contains(a, b) && contains(b, a))) changes.push(field);
  }
  return changes;
}
