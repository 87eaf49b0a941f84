/**
 * The data planes' rate-limit attachers (docs/architecture.md, "A data plane is one folder"), one
 * `attacher.ts` per data plane whose module declares `rateLimitAttachment`; the RateLimitPolicy
 * controller creates those whose flag is on. A new one is its folder's attacher and one line in
 * `RATE_LIMIT_ATTACHERS`. I/O, at the controllers' level (it is not imported by the pure files).
 */
import { contourAttacher } from './contour/attacher.js';
import { envoyGatewayAttacher } from './envoy-gateway/attacher-keys.js';
import type { RateLimitAttachment, RateLimitAttacherModule } from './types.js';

/** Every rate-limit attacher, in the order the flags and the unsupported-target message list them. */
export const RATE_LIMIT_ATTACHERS: readonly RateLimitAttacherModule[] = [
  contourAttacher,
  envoyGatewayAttacher,
];

/** The attachment of an attacher's data plane. Throws when the module declares none (a registry defect). */
export function attachmentOf(attacher: RateLimitAttacherModule): RateLimitAttachment {
  const attachment = attacher.dataPlane.rateLimitAttachment;
  if (attachment === undefined)
    throw new Error(
      `data plane module "${attacher.dataPlane.name}" has an attacher but no rateLimitAttachment`,
    );
  return attachment;
}
