/**
 * The last good certificate of each CustomDomain, kept where its tenant cannot write
 * (docs/customdomains.md, "The last good certificate"): a `kubernetes.io/tls` Secret in the
 * operator's namespace, `portico-last-good-<CustomDomain uid>`, written with every certificate
 * Portico stores (after it was judged able to serve, issuance.ts) and read back when the domain's
 * own Secret, in the tenant's namespace, is found unable to serve (edited, replaced or deleted by
 * someone else): the reconcile then writes the copy back instead of serving nothing while a new
 * certificate is ordered. Tenants are untrusted: nothing in their namespace (the Secret, its
 * annotations, the domain's status) is taken as the certificate to restore; only this copy is.
 *
 * Named by the domain's uid, so a domain deleted and created again under the same name never gets
 * the old domain's copy; the copy is deleted with the domain (finalize.ts). Not cached: it is read
 * only to restore, and written only when a certificate is stored.
 */
import type { CoreV1Api, KubernetesObjectApi, V1Secret } from '@kubernetes/client-node';
import {
  ACME_ISSUER_ANNOTATION,
  FIELD_MANAGER,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  REPLACES_ANNOTATION,
  type CustomDomain,
} from '../../api/customdomain.js';
import { isNotFound } from '../../kube/errors.js';
import { serverSideApply } from '../../kube/server-side-apply.js';

/** Label on every copy (`true`). Not `portico.dev/customdomain`: the owned-object informers select that. */
export const LAST_GOOD_CERTIFICATE_LABEL = 'portico.dev/last-good-certificate';
/** Annotation on a copy: `<namespace>/<name>` of the CustomDomain it belongs to, for a person reading it. */
export const LAST_GOOD_OF_ANNOTATION = 'portico.dev/last-good-certificate-of';

/** The name of the copy of the CustomDomain with uid `uid`. */
export function lastGoodSecretName(uid: string): string {
  return `portico-last-good-${uid}`;
}

/** A certificate as it is stored: the PEM chain and key, and the annotations of the domain's Secret. */
export interface StoredCertificatePem {
  certificatePem: string;
  privateKeyPem: string;
  /** `portico.dev/replaces` and `portico.dev/acme-issuer` as on the domain's Secret. */
  annotations: Record<string, string>;
}

export class LastGoodCertificates {
  readonly #core: Pick<CoreV1Api, 'readNamespacedSecret' | 'deleteNamespacedSecret'>;
  readonly #objects: KubernetesObjectApi;
  readonly #namespace: string;

  /** @param namespace the operator's namespace */
  constructor(
    core: Pick<CoreV1Api, 'readNamespacedSecret' | 'deleteNamespacedSecret'>,
    objects: KubernetesObjectApi,
    namespace: string,
  ) {
    this.#core = core;
    this.#objects = objects;
    this.#namespace = namespace;
  }

  /** Where the copy of `domain` is: the operator's namespace and `lastGoodSecretName`. */
  at(domain: Pick<CustomDomain, 'metadata'>): { namespace: string; name: string } {
    return { namespace: this.#namespace, name: lastGoodSecretName(domain.metadata.uid ?? '') };
  }

  /**
   * Keeps `stored` as the last good certificate of `domain` (server-side apply over the previous
   * one). The caller has judged it able to serve.
   *
   * @throws ApiException on any API error
   */
  async keep(domain: CustomDomain, stored: StoredCertificatePem): Promise<void> {
    const { namespace, name } = this.at(domain);
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [LAST_GOOD_CERTIFICATE_LABEL]: 'true' },
        annotations: {
          [LAST_GOOD_OF_ANNOTATION]: `${domain.metadata.namespace}/${domain.metadata.name}`,
          ...pick(stored.annotations, [REPLACES_ANNOTATION, ACME_ISSUER_ANNOTATION]),
        },
      },
      type: 'kubernetes.io/tls',
      data: {
        'tls.crt': Buffer.from(stored.certificatePem).toString('base64'),
        'tls.key': Buffer.from(stored.privateKeyPem).toString('base64'),
      },
    };
    await serverSideApply(this.#objects, secret, { fieldManager: FIELD_MANAGER, force: true });
  }

  /**
   * The copy of `domain`, read from the API server, or undefined when there is none (a certificate
   * stored before Portico kept copies, or none stored yet). The caller judges whether it can serve.
   *
   * @throws ApiException on any API error other than 404
   */
  async read(domain: Pick<CustomDomain, 'metadata'>): Promise<StoredCertificatePem | undefined> {
    let secret: V1Secret;
    try {
      secret = await this.#core.readNamespacedSecret(this.at(domain));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    const field = (key: string): string => Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
    return {
      certificatePem: field('tls.crt'),
      privateKeyPem: field('tls.key'),
      annotations: pick(secret.metadata?.annotations ?? {}, [REPLACES_ANNOTATION, ACME_ISSUER_ANNOTATION]),
    };
  }

  /**
   * Deletes the copy of `domain`; absent already is fine.
   *
   * @throws ApiException on any API error other than 404
   */
  async remove(domain: Pick<CustomDomain, 'metadata'>): Promise<void> {
    try {
      await this.#core.deleteNamespacedSecret(this.at(domain));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}

function pick(from: Record<string, string>, keys: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of keys) if (from[key] !== undefined) out[key] = from[key];
  return out;
}
