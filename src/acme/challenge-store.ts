/**
 * Pending HTTP-01 key authorizations, by token (RFC 8555 §8.3). The challenge server reads it; the
 * issuer writes it for the life of one challenge.
 */
export class Http01ChallengeStore {
  readonly #byToken = new Map<string, string>();

  /** Serves `keyAuthorization` at `/.well-known/acme-challenge/<token>` until `delete`. */
  set(token: string, keyAuthorization: string): void {
    this.#byToken.set(token, keyAuthorization);
  }

  get(token: string): string | undefined {
    return this.#byToken.get(token);
  }

  delete(token: string): void {
    this.#byToken.delete(token);
  }

  get size(): number {
    return this.#byToken.size;
  }
}
