/**
 * The server's view of its config: a watch (through the Kubernetes API, ResilientInformer) on the
 * ConfigMaps labelled `app.kubernetes.io/component=ratelimit` in the config namespace, of which it
 * reads the config shards (`--config-name` and `<config-name>-<n>`, `config-schema.ts`), key
 * `config.json`. Each new resourceVersion of a shard is handed to `onConfig`, each deleted shard to
 * `onDelete` (whose policies stay in force: removing limits because an object vanished would fail
 * open without anyone deciding to).
 */
import type { KubeConfig, V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  RATELIMIT_COMPONENT_LABEL,
  RATELIMIT_COMPONENT_VALUE,
  RATELIMIT_CONFIG_KEY,
} from '../api/ratelimitpolicy.js';
import { ResilientInformer } from '../kube/informer.js';
import { configShardIndex } from './config-schema.js';

export const RATELIMIT_SELECTOR = `${RATELIMIT_COMPONENT_LABEL}=${RATELIMIT_COMPONENT_VALUE}`;

export interface ConfigWatcherOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  /** `--config-name`: the name of shard 0, and the prefix of the others. */
  readonly configName: string;
  /**
   * Called with the shard's name and index, the text of `config.json` (undefined when the key is
   * missing) and the resourceVersion.
   */
  readonly onConfig: (name: string, index: number, text: string | undefined, resourceVersion: string) => void;
  /** Called with the name of a shard that was deleted. */
  readonly onDelete: (name: string) => void;
  readonly log: Logger;
}

export class ConfigWatcher {
  readonly #informer: ResilientInformer<V1ConfigMap>;
  /** The resourceVersion handed to onConfig last, by shard name. */
  readonly #lastVersions = new Map<string, string>();

  constructor(options: ConfigWatcherOptions) {
    const { namespace, configName, log } = options;
    const handle = (cm: V1ConfigMap, verb: 'add' | 'update' | 'delete'): void => {
      const name = cm.metadata?.name ?? '';
      const index = configShardIndex(configName, name);
      if (index === undefined) return;
      if (verb === 'delete') {
        log.warn({ namespace, name }, 'config ConfigMap deleted');
        this.#lastVersions.delete(name);
        options.onDelete(name);
        return;
      }
      const version = cm.metadata?.resourceVersion ?? '';
      if (version === this.#lastVersions.get(name)) return;
      this.#lastVersions.set(name, version);
      options.onConfig(name, index, cm.data?.[RATELIMIT_CONFIG_KEY], version);
    };
    this.#informer = new ResilientInformer<V1ConfigMap>(options.kubeConfig, {
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      labelSelector: RATELIMIT_SELECTOR,
      onChange: handle,
      // A resync re-reads the cache; an unchanged resourceVersion is skipped above.
      onResync: (objects) => {
        for (const cm of objects) handle(cm, 'update');
      },
      resyncMs: 300_000,
      log,
    });
  }

  /** True once the first list has been read (with or without the ConfigMap). */
  get synced(): boolean {
    return this.#informer.synced;
  }

  start(): void {
    this.#informer.start();
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }
}
