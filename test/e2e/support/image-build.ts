/**
 * The image build `npm test` (scripts/test.sh) runs beside the tests: a file that builds images
 * itself waits for it first, so two builds never share podman's storage (~/.cache/portico/podman)
 * at once and the second finds the Debian base images the first made. (helm-kubelet.test.ts has
 * its own copy of this wait, which also fails when that build failed.)
 */
import { readFile } from 'node:fs/promises';

/** How long to wait for the image build beside the tests (ms). */
export const IMAGE_BUILD_WAIT_MS = 900_000;

/**
 * Waits until PORTICO_E2E_IMAGE_BUILD_STATUS holds the build's exit status (polled every 2 s, at
 * most IMAGE_BUILD_WAIT_MS); returns at once without that variable (a run of chosen files, where
 * scripts/test.sh builds nothing). Its outcome does not matter here: the caller builds its own.
 * @throws Error when the build had not ended in time.
 */
export async function imageBuildEnded(): Promise<void> {
  const statusFile = process.env.PORTICO_E2E_IMAGE_BUILD_STATUS;
  if (statusFile === undefined || statusFile === '') return;
  const deadline = Date.now() + IMAGE_BUILD_WAIT_MS;
  while ((await readFile(statusFile, 'utf8').catch(() => undefined)) === undefined) {
    if (Date.now() > deadline) {
      throw new Error(
        `the image build beside the tests had not ended after ${IMAGE_BUILD_WAIT_MS / 60_000} min`,
      );
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}
