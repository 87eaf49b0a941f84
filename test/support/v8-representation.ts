/**
 * V8's own view of how an object is stored, for unit tests of code that keeps many objects (the
 * informer caches): `hasFastProperties(o)` is true when `o` has fast properties, false when V8 keeps
 * them in a hash table (dictionary mode, e.g. after a `delete`), which takes several times the
 * memory. Uses V8's `%HasFastProperties` intrinsic, enabled for this process by
 * `--allow-natives-syntax` when this module loads.
 */
import { setFlagsFromString } from 'node:v8';
import { runInThisContext } from 'node:vm';

setFlagsFromString('--allow-natives-syntax');

/** True when V8 stores `o`'s properties in fast mode (not as a dictionary). */
export const hasFastProperties = runInThisContext('(o) => %HasFastProperties(o)') as (o: unknown) => boolean;
