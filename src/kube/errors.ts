/**
 * Classifies errors of the Kubernetes API client (`ApiException` from @kubernetes/client-node 2.x,
 * which carries the HTTP status in `code`).
 */

/** The HTTP status of a Kubernetes API error, or undefined for a network or programming error. */
export function apiStatusCode(err: unknown): number | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = err.code;
    if (typeof code === 'number') return code;
  }
  return undefined;
}

export const isNotFound = (err: unknown): boolean => apiStatusCode(err) === 404;
/** 409: a stale resourceVersion (optimistic concurrency) or an existing name. */
export const isConflict = (err: unknown): boolean => apiStatusCode(err) === 409;
