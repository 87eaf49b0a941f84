/**
 * The HostnameClaim API, group `portico.dev`, version `v1alpha1`, cluster-scoped. It mirrors
 * `crds/portico.dev_hostnameclaims.yaml`; the CRD schema is the authority.
 *
 * A HostnameClaim's name is the hostname it claims, so creating it is the atomic step that gives a
 * hostname to exactly one CustomDomain (docs/customdomains.md, "Who holds a hostname").
 */
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { API_VERSION } from './customdomain.js';

export const HOSTNAME_CLAIM_KIND = 'HostnameClaim';
export const HOSTNAME_CLAIM_PLURAL = 'hostnameclaims';

/**
 * Annotation on a HostnameClaim that a deployed CustomDomain took over from a holder never accepted
 * (docs/customdomains.md, "A holder that never deploys"): the former holder's metadata.uid, so that
 * domain can say why it lost the hostname.
 */
export const TAKEN_OVER_FROM_ANNOTATION = 'portico.dev/taken-over-from-uid';

/** The CustomDomain that holds a hostname. */
export interface CustomDomainRef {
  namespace: string;
  name: string;
  /** The holder's metadata.uid: a CustomDomain created again under the same name is a new claimant. */
  uid: string;
}

export interface HostnameClaim {
  apiVersion: typeof API_VERSION;
  kind: typeof HOSTNAME_CLAIM_KIND;
  /** metadata.name is the hostname (lowercase A-labels, no trailing dot). */
  metadata: V1ObjectMeta & { name: string };
  spec: { customDomainRef: CustomDomainRef };
}
