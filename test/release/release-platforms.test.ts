/**
 * `npm run release:check` (docs/testing.md, "The release's other platforms"; not part of `npm
 * test`): a release as it is made for users, beyond what test/e2e/release.test.ts checks in `npm
 * test`. In a copy of this work tree and into CNCF Distribution's registry on loopback
 * (test/e2e/support/release.ts), `npm run release` builds the image with every step run again
 * (no `--layer-cache`) and `kubectl-portico` for all six platforms (linux, darwin and windows on
 * amd64 and arm64, about 10 minutes on 2 shared cores); then:
 *
 * - every archive holds its executable, LICENSE and NODE-LICENSE, and each executable passes the
 *   header checks of its platform (src/release/executable.ts: ELF, Mach-O or PE machine, the SEA
 *   fuse, and for darwin an ad-hoc signature that matches its bytes); the krew manifest names all
 *   six with their sums and carries the macOS caveat;
 * - the linux-arm64 executable, under qemu-user, explains a domain the stack's operator reconciled;
 * - the image built again from the release's tag with every step run again has the image ID of the
 *   one the release built and pushed (docs/install.md, "Verifying a released image").
 *
 * It runs on the e2e project's stack (global setup and clean-up), as a vitest project of its own
 * (`release` in vitest.config.ts), which `npm test` does not run.
 */
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  createCustomDomain,
  createProject,
  sandbox,
  unique,
  waitForCondition,
} from '../e2e/support/cluster.js';
import { run, runOk } from '../e2e/support/helm.js';
import {
  ReleaseWorkspace,
  builtImageId,
  checkPluginArchive,
  readSums,
  releasedImage,
} from '../e2e/support/release.js';
import { DARWIN_CAVEAT, PLUGIN_PLATFORMS, pluginArchiveName } from '../../src/release/artifacts.js';

const ws = new ReleaseWorkspace(`${unique('relchk')}.portico.dev`);
let released = { stdout: '', stderr: '' };

beforeAll(async () => {
  await ws.setUp();
}, 1_200_000);

afterAll(async () => {
  await ws.tearDown(undefined, 'release-platforms.test.ts');
}, 120_000);

describe('a release of every platform', () => {
  const executables = new Map<string, string>();

  it('builds the image with every step, the six platforms’ archives, their krew manifest and sums', async () => {
    const { v1 } = ws;
    const result = await ws.release([
      '--version',
      v1,
      '--registry',
      ws.registryUrl,
      '--plain-http',
      '--cached-bases',
    ]);
    released = result;
    expect(result.code, result.stderr.slice(-4000)).toBe(0);
    const out = ws.out(v1);
    const files = (await readdir(out)).sort();
    expect(files).toEqual(
      [
        'SHA256SUMS',
        'kubectl-portico.krew.yaml',
        ...PLUGIN_PLATFORMS.map((p) => pluginArchiveName(v1, p)),
        `portico-${v1}.cdx.json`,
        `portico-${v1}.tgz`,
      ].sort(),
    );
    const sums = await readSums(out);
    expect([...sums.keys()].sort()).toEqual(files.filter((f) => f !== 'SHA256SUMS'));
    const krew = parse(await readFile(path.join(out, 'kubectl-portico.krew.yaml'), 'utf8')) as {
      spec: {
        version: string;
        caveats?: string;
        platforms: { selector: { matchLabels: { os: string; arch: string } }; uri: string; sha256: string }[];
      };
    };
    expect(krew.spec.version).toBe(`v${v1}`);
    expect(krew.spec.caveats).toBe(DARWIN_CAVEAT);
    expect(krew.spec.platforms.map((p) => p.selector.matchLabels)).toEqual(
      PLUGIN_PLATFORMS.map(({ os, arch }) => ({ os, arch })),
    );
    for (const p of krew.spec.platforms) {
      const file = p.uri.split('/').at(-1) ?? '';
      expect(p.sha256, file).toBe(sums.get(file));
    }
    for (const platform of PLUGIN_PLATFORMS) {
      executables.set(
        `${platform.os}-${platform.arch}`,
        await checkPluginArchive(out, v1, platform, ws.work),
      );
    }
  }, 1_800_000);

  it('the linux-arm64 executable is an aarch64 binary that explains a domain (under qemu-user)', async () => {
    const executable = executables.get('linux-arm64');
    expect(executable, 'the archives were built and checked').toBeDefined();
    const header = (await readFile(executable ?? '')).subarray(0, 20);
    expect(header.readUInt16LE(18)).toBe(0xb7); // ELF e_machine EM_AARCH64
    const ns = unique('relchk-plugin');
    await createProject(ns, { plan: 'free' });
    await createCustomDomain(ns, 'www', { hostname: `www.${ns}.example`, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Accepted', 'False', 'PlanNotEligible');
    const qemu = (await runOk('bash', ['-c', 'command -v qemu-aarch64'])).trim();
    const explained = await run(
      qemu,
      [
        '-L',
        '/usr/aarch64-linux-gnu',
        executable ?? '',
        'explain',
        'www',
        '-n',
        ns,
        '--kubeconfig',
        sandbox.kubeconfig,
      ],
      { env: { PATH: '' }, timeoutMs: 90_000 },
    );
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain('PlanNotEligible');
  }, 180_000);

  it('the image built again from the release tag, every step run again, has the released image’s ID', async () => {
    const { v1 } = ws;
    const id = builtImageId(released.stderr);
    const pushed = releasedImage(released.stdout);
    expect((await ws.git(['describe', '--exact-match', '--tags', 'HEAD'])).trim()).toBe(`v${v1}`);
    const tag = `localhost/portico-release-check:${v1}`;
    try {
      const rebuilt = await run(path.join(ws.copy, 'scripts/build-image.sh'), ['--tag', tag, '--no-cache'], {
        cwd: ws.copy,
        timeoutMs: 1_800_000,
      });
      expect(rebuilt.code, rebuilt.stderr.slice(-4000)).toBe(0);
      expect(/^id: (sha256:[0-9a-f]{64})$/m.exec(rebuilt.stdout)?.[1]).toBe(id);
      // ... and the pushed image's manifest is that image's (the digest the registry answered).
      expect(await ws.manifestDigest('portico', v1)).toBe(pushed.digest);
    } finally {
      await ws.podman(['rmi', '--ignore', tag]);
    }
  }, 1_800_000);
});
