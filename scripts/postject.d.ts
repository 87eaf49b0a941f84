// The part of the `postject` package's API (dist/api.js) that scripts/build-plugin-sea.ts uses; the
// package ships no type declarations.
declare module 'postject' {
  export interface InjectOptions {
    /** The fuse string the target binary carries (Node.js: NODE_SEA_FUSE_<hash>). */
    sentinelFuse?: string;
    /** Mach-O only. */
    machoSegmentName?: string;
    /** Overwrite a resource of the same name. */
    overwrite?: boolean;
  }
  /** Injects `resourceData` as the resource `resourceName` into the executable `filename`, in place. */
  export function inject(
    filename: string,
    resourceName: string,
    resourceData: Buffer,
    options?: InjectOptions,
  ): Promise<void>;
}
