/**
 * The server's view of its config: a watch (through the Kubernetes API, ResilientInformer) on the
 * ConfigMaps labelled `app.kubernetes.io/component=ratelimit` in the config namespace, of which it
 * reads the one named `--config-name`, key `config.json`. Each new resourceVersion is handed to
 * `onConfig`; a deleted ConfigMap is logged and the last config stays in force (removing every limit
 * because an object vanished would fail open without anyone deciding to).
 */
import type { CoreV1Api, KubeConfig, V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  RATELIMIT_COMPONENT_LABEL,
  RATELIMIT_COMPONENT_VALUE,
  RATELIMIT_CONFIG_KEY,
} from '../api/ratelimitpolicy.js';
import { ResilientInformer } from '../kube/informer.js';

export const RATELIMIT_SELECTOR = `${RATELIMIT_COMPONENT_LABEL}=${RATELIMIT_COMPONENT_VALUE}`;

export interface ConfigWatcherOptions {
  readonly kubeConfig: KubeConfig;
  readonly core: CoreV1Api;
  readonly namespace: string;
  readonly name: string;
  /** Called with the text of `config.json` (undefined when the key is missing) and the resourceVersion. */
  readonly onConfig: (text: string | undefined, resourceVersion: string) => void;
  readonly log: Logger;
}

export class ConfigWatcher {
  readonly #informer: ResilientInformer<V1ConfigMap>;
  #lastVersion: string | undefined;

  constructor(options: ConfigWatcherOptions) {
    const { namespace, name, log } = options;
    const handle = (cm: V1ConfigMap, verb: 'add' | 'update' | 'delete'): void => {
      if (cm.metadata?.name !== name) return;
      if (verb === 'delete') {
        log.warn({ namespace, name }, 'config ConfigMap deleted; keeping the last config loaded');
        this.#lastVersion = undefined;
        return;
      }
      const version = cm.metadata.resourceVersion ?? '';
      if (version === this.#lastVersion) return;
      this.#lastVersion = version;
      options.onConfig(cm.data?.[RATELIMIT_CONFIG_KEY], version);
    };
    this.#informer = new ResilientInformer<V1ConfigMap>(options.kubeConfig, {
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      list: () =>
        options.core.listNamespacedConfigMap({
          namespace,
          labelSelector: RATELIMIT_SELECTOR,
        }),
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
