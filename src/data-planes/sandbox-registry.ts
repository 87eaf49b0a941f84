/**
 * The data planes `portico sandbox up --data-plane` can start, one `sandbox.ts` per data plane's
 * folder (docs/architecture.md, "A data plane is one folder"). A new one is its folder's
 * `sandbox.ts` and one line in `SANDBOX_DATA_PLANE_MODULES`. Development only.
 */
import { contourSandbox } from './contour/sandbox.js';
import { envoyGatewaySandbox } from './envoy-gateway/sandbox.js';
import { noneSandbox } from './none/sandbox.js';
import type { EnvFacts, SandboxDataPlaneModule } from './sandbox-types.js';
import { traefikSandbox } from './traefik/sandbox.js';

/** Every data plane the sandbox can run, in the order `--data-plane`'s help lists them. */
export const SANDBOX_DATA_PLANE_MODULES = [
  contourSandbox,
  envoyGatewaySandbox,
  traefikSandbox,
  noneSandbox,
] as const;

/** A data plane the sandbox can run. */
export type SandboxDataPlane = (typeof SANDBOX_DATA_PLANE_MODULES)[number]['name'];

export const SANDBOX_DATA_PLANES: readonly SandboxDataPlane[] = SANDBOX_DATA_PLANE_MODULES.map((m) => m.name);

/** The names of a module's `<dir>/env` facts. */
type EnvNameOf<M> = M extends SandboxDataPlaneModule<string, string, infer EnvName> ? EnvName : never;

/**
 * The facts the data planes record in `<dir>/state.json`, every module's (`envFacts`): the part of
 * src/sandbox/state.ts's `SandboxEnv` that is theirs, each absent where its data plane does not run.
 */
export type DataPlaneEnv = EnvFacts<EnvNameOf<(typeof SANDBOX_DATA_PLANE_MODULES)[number]>>;

/**
 * The `<dir>/env` variables of the data planes' facts, `[fact, variable]`, in file order (the
 * modules' order, each module's facts in its order); a fact two modules declare is listed once.
 */
export const DATA_PLANE_ENV_VARIABLES: readonly (readonly [fact: string, variable: string])[] = [
  ...new Map(
    SANDBOX_DATA_PLANE_MODULES.flatMap((m) =>
      Object.entries(m.envFacts as Record<string, { variable?: string }>).flatMap(([fact, f]) =>
        f.variable === undefined ? [] : [[fact, f.variable] as const],
      ),
    ),
  ),
];

/** The module of `name`. */
export function sandboxDataPlaneModule(name: SandboxDataPlane): SandboxDataPlaneModule<SandboxDataPlane> {
  const found = SANDBOX_DATA_PLANE_MODULES.find((m) => m.name === name);
  if (found === undefined) throw new Error(`no sandbox data plane module "${name}"`);
  return found;
}
