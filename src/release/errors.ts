// src/release/: the pure rules of `npm run release` (scripts/release.ts), run with tsx; not part of
// the built package (tsconfig.build.json leaves them out) and never imported by runtime code.
/** A release refused or failed; `message` says what happened and what to do. Nothing was changed when it is thrown before the release writes. */
export class ReleaseError extends Error {
  readonly code = 'PORTICO_RELEASE_ERROR';
  constructor(message: string) {
    super(message);
    this.name = 'ReleaseError';
  }
}

/** True for a ReleaseError, also one from another copy of this module. */
export function isReleaseError(err: unknown): err is ReleaseError {
  return (
    typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'PORTICO_RELEASE_ERROR'
  );
}
