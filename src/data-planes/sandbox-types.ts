/**
 * What a data plane is to `portico sandbox up --data-plane <name>` (development only): how the
 * sandbox starts it, what the operator is told about it, what `<dir>/env` records, and how
 * `portico sandbox status` checks it. Each data plane the sandbox can run has a `sandbox.ts` in its
 * folder, registered in `sandbox-registry.ts`; the operator's side of it is its `index.ts`.
 */
import type { ChartDefaults } from '../sandbox/admission.js';
import type { ControllerOptions } from '../sandbox/controller.js';
import type { Kubectl } from '../sandbox/kubectl.js';
import type { SandboxPaths } from '../sandbox/paths.js';
import type { PortKind } from '../sandbox/ports.js';
import type { DataPlaneTools, Tools } from '../sandbox/tools.js';

/** The operator's options that depend on the data plane (src/sandbox/controller.ts). */
export type DataPlaneControllerOptions = Pick<
  ControllerOptions,
  | 'dataPlane'
  | 'dataPlaneAcknowledgement'
  | 'dataPlaneName'
  | 'gatewayParentRefs'
  | 'ingressFlavor'
  | 'ingressClass'
  | 'rateLimitAttachments'
  | 'servingCheckAddress'
>;

/**
 * One fact a data plane records about itself in `<dir>/state.json` (a string field of
 * src/sandbox/state.ts's `SandboxEnv`, by the name its module gives it) and, when it has a
 * `variable`, as that shell variable of `<dir>/env`.
 */
export interface EnvFact {
  /** Its variable in `<dir>/env` (e.g. `CONTOUR_XDS_ADDR`); undefined: state.json only. */
  readonly variable?: string;
  /** What it is, for readers of state.json (`readSandboxEnv`, the e2e tests). */
  readonly doc: string;
}

/** The facts of `<dir>/env` a data plane records, by name: a partial record of strings. */
export type EnvFacts<EnvName extends string> = Readonly<Partial<Record<EnvName, string>>>;

/** What `start` is given: the stack so far. */
export interface SandboxStartContext<PortName extends string> {
  readonly paths: SandboxPaths;
  /** The repository holding scripts/, crds/, examples/ and dist/. */
  readonly repoRoot: string;
  readonly tools: Tools;
  /** kubectl as the cluster's admin. */
  readonly kubectl: Kubectl;
  /** Progress lines. */
  readonly step: (line: string) => void;
  /** The free loopback ports picked for the module's `ports`. */
  readonly ports: Readonly<Record<PortName, number>>;
  /** The namespace of the operator's own objects. */
  readonly operatorNamespace: string;
  /** Whether the sandbox runs as the chart's defaults do, and what that set up (src/sandbox/admission.ts). */
  readonly chartDefaults: boolean;
  readonly chart: ChartDefaults;
  /** Plain HTTP redirected to HTTPS where the data plane serves HTTP itself (`sandbox up --https-redirect`). */
  readonly httpsRedirect?: boolean;
}

/** What a started data plane hands back to the stack. */
export interface StartedSandboxDataPlane<EnvName extends string = string> {
  /** The operator's data-plane options (every one: the stack adds none of its own). */
  readonly controllerOptions: DataPlaneControllerOptions;
  /** The facts of `<dir>/env` about it, of those its module declares (`envFacts`). */
  readonly env: EnvFacts<EnvName>;
  /** The examples to apply, when it rewrote them; undefined: examples/. */
  readonly examplesDir?: string | undefined;
}

/** One readiness check of `portico sandbox status` (src/sandbox/status.ts). */
export interface SandboxCheck {
  /** The process name (`<dir>/pids/<name>.pid`). */
  readonly name: string;
  readonly hasProcess: boolean;
  readonly probe: () => Promise<true | string>;
}

/** A data plane the sandbox can start (`portico sandbox up --data-plane <name>`). */
export interface SandboxDataPlaneModule<
  Name extends string = string,
  PortName extends string = string,
  EnvName extends string = never,
> {
  /** The value of `--data-plane` (the operator's `--data-plane` where it declares one). */
  readonly name: Name;
  /**
   * Its tools: built by its folder's `tools.sh` (scripts/install-tools.sh sources each), found in
   * `tools.binDir` by these names (src/sandbox/tools.ts checks them).
   */
  readonly tools: DataPlaneTools;
  /**
   * Whether `sandbox up` gives it the apps zone (Knot + BIND, src/sandbox/apps-zone.ts) and the
   * operator `--apps-domain`: true where its flavor's subdomain route (`<name>/subdomain-route.ts`)
   * serves the example Projects' auto-generated subdomains with the wildcard certificate here.
   */
  readonly appsDomain: boolean;
  /** The loopback ports it listens on, picked with the stack's (src/sandbox/ports.ts). */
  readonly ports: Readonly<Record<PortName, PortKind>>;
  /** Its processes that `sandbox down` stops before the operator (the rest stop after it). */
  readonly stopFirst: readonly string[];
  /**
   * The facts it records in `<dir>/state.json` and `<dir>/env`, in `<dir>/env`'s order
   * (sandbox-registry.ts derives `DataPlaneEnv`, the fields of `SandboxEnv` they make).
   */
  readonly envFacts: Readonly<Record<EnvName, EnvFact>>;
  /** Installs its CRDs and starts its processes, after the cluster, before the operator. */
  start(context: SandboxStartContext<PortName>): Promise<StartedSandboxDataPlane<EnvName>>;
  /** The readiness checks of its processes, from `<dir>/env` (none when it did not start them). */
  checks(env: EnvFacts<EnvName>): SandboxCheck[];
}

/** Declares a sandbox data plane with its name, port names and fact names as literal types. */
export function defineSandboxDataPlane<
  const Name extends string,
  const PortName extends string,
  const EnvName extends string = never,
>(module: SandboxDataPlaneModule<Name, PortName, EnvName>): SandboxDataPlaneModule<Name, PortName, EnvName> {
  return module;
}
