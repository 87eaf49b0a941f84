/**
 * `portico_build_info`: a gauge at 1 whose labels say what runs (Prometheus's `<name>_build_info`
 * convention, as in `prometheus_build_info` and cert-manager's `certmanager_controller_build_info`),
 * so a query can join any series with the version behind it and a dashboard can show a rollout.
 */
import { Gauge, type Registry } from 'prom-client';
import type { BuildInfo } from '../build-info.js';

/**
 * Registers `portico_build_info{version, commit, node_version} 1` in `registry`.
 * @param info the build (src/build-info.ts `buildInfo()`).
 * @param nodeVersion the Node.js runtime, e.g. `v24.21.0` (`process.version`).
 * @throws Error from prom-client when the registry already holds a metric of that name.
 */
export function registerBuildInfo(registry: Registry, info: BuildInfo, nodeVersion: string): void {
  new Gauge({
    name: 'portico_build_info',
    help: 'Always 1: the version and commit of the running Portico and its Node.js version.',
    labelNames: ['version', 'commit', 'node_version'],
    registers: [registry],
  }).set({ version: info.version, commit: info.commit, node_version: nodeVersion }, 1);
}
