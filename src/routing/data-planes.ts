/**
 * Which of Portico's routing flavors each data plane takes (docs/routing.md, "Data planes and
 * flavors"): for every data plane the operator can be told it runs with (`--data-plane`) and every
 * flavor it can write (`--routing-mode`, `--ingress-flavor`), whether a serving domain is served and
 * whether a redirect takes effect, and if not, why and which flags to set instead. Pure: a table
 * and a lookup.
 *
 * A data plane that takes a flavor's Ingress but not its redirect is the case this table exists for:
 * it publishes the Ingress's address (so the acknowledgement alone says "taken") while it proxies the
 * hostname to the Ingress's backend instead of answering with the redirect. The routing plan turns
 * such a cell into `Routed=False`, reason `UnsupportedByDataPlane`, instead of Ready.
 *
 * Each data plane's row, with its sources, is its module's `flavors` (src/data-planes/<name>/,
 * registered in src/data-planes/registry.ts); the tables here are read from the modules.
 */
import { DATA_PLANE_MODULES, DATA_PLANES, dataPlaneModule, type DataPlane } from '../data-planes/registry.js';
import {
  flavorSupport,
  ROUTING_FLAVORS,
  type FlavorSupport,
  type RoutingFlavor,
} from '../data-planes/types.js';
import type { RoutingOptions } from './options.js';

export { DATA_PLANES, ROUTING_FLAVORS, type DataPlane, type FlavorSupport, type RoutingFlavor };

/** A table with one entry per data plane, read from each module. */
function byDataPlane<T>(
  read: (module: (typeof DATA_PLANE_MODULES)[number]) => T,
): Readonly<Record<DataPlane, T>> {
  return Object.fromEntries(DATA_PLANE_MODULES.map((m) => [m.name, read(m)])) as Record<DataPlane, T>;
}

/** Each data plane's name in condition messages (the default of `--data-plane-name`). */
export const DATA_PLANE_NAMES: Readonly<Record<DataPlane, string>> = byDataPlane((m) => m.displayName);

/** The flavor `options` write (ingress mode's default flavor is `nginx`). */
export function routingFlavor(options: Pick<RoutingOptions, 'mode' | 'ingressFlavor'>): RoutingFlavor {
  if ((options.mode ?? 'ingress') === 'gateway') return 'gateway';
  return options.ingressFlavor ?? 'nginx';
}

/** The flags that make each data plane serve and redirect (its working flavor). */
export const WORKING_FLAGS: Readonly<Record<DataPlane, string>> = byDataPlane((m) => m.workingFlags);

/** The flavor each data plane serves and redirects with. */
export const WORKING_FLAVOR: Readonly<Record<DataPlane, RoutingFlavor>> = byDataPlane((m) => m.workingFlavor);

/** The table: data plane × flavor. Every cell is shown by a test (docs/routing.md names it). */
export const FLAVOR_SUPPORT: Readonly<Record<DataPlane, Readonly<Record<RoutingFlavor, FlavorSupport>>>> =
  byDataPlane(
    (m) =>
      Object.fromEntries(ROUTING_FLAVORS.map((f) => [f, flavorSupport(m, f)])) as Record<
        RoutingFlavor,
        FlavorSupport
      >,
  );

/** The flags that select `flavor`, as the operator is started with them. */
function flagsOf(flavor: RoutingFlavor): string {
  return flavor === 'gateway' ? '--routing-mode gateway' : `--ingress-flavor ${flavor}`;
}

/**
 * Whether the data plane takes what `options` write for a domain that serves (`redirect` false) or
 * redirects (`redirect` true). Undefined when it does, or when no data plane is declared (nothing
 * to judge by); otherwise the sentence for `Routed=False`, reason `UnsupportedByDataPlane`, naming
 * the data plane, what it does with the objects, and the flags to set.
 */
export function unsupportedByDataPlane(
  dataPlane: DataPlane | undefined,
  options: Pick<RoutingOptions, 'mode' | 'ingressFlavor'>,
  redirect: boolean,
): string | undefined {
  if (dataPlane === undefined) return undefined;
  const flavor = routingFlavor(options);
  const module = dataPlaneModule(dataPlane);
  const cell = flavorSupport(module, flavor);
  if (redirect ? cell.redirects : cell.serves) return undefined;
  const name = module.displayName;
  const what = redirect ? 'redirect' : 'serve';
  return (
    `The operator runs with ${flagsOf(flavor)} for data plane ${name} (--data-plane ${dataPlane}), and ${name} cannot ${what} this domain that way: ${cell.why ?? ''}. ` +
    `Start the operator with ${module.workingFlags}, the flavor ${name} takes (docs/routing.md, "Data planes and flavors").`
  );
}
