/**
 * The data planes `portico sandbox up --data-plane` can start, one `sandbox.ts` per data plane's
 * folder (docs/architecture.md, "A data plane is one folder"). A new one is its folder's
 * `sandbox.ts` and one line in `SANDBOX_DATA_PLANE_MODULES`. Development only.
 */
import { contourSandbox } from './contour/sandbox.js';
import { envoyGatewaySandbox } from './envoy-gateway/sandbox.js';
import { noneSandbox } from './none/sandbox.js';
import type { SandboxDataPlaneModule } from './sandbox-types.js';
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

/** The module of `name`. */
export function sandboxDataPlaneModule(name: SandboxDataPlane): SandboxDataPlaneModule<SandboxDataPlane> {
  const found = SANDBOX_DATA_PLANE_MODULES.find((m) => m.name === name);
  if (found === undefined) throw new Error(`no sandbox data plane module "${name}"`);
  return found;
}
